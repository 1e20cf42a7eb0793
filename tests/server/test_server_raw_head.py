"""`GET /api/traces/<id>` serves a trace's head as the text it was stored as (issue 26 item
1): the answer is the decoded head's (whole or split, with follow-ups, spooled), its events
the row's own text, and `done` is read from the row's tail alone (server/store/raw.py)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from server_support import down_store

from kernelscope.server.jobs.followups import states
from kernelscope.server.store.parts import split
from kernelscope.server.store.raw import StoredHead, last_element
from kernelscope.server.store.spool import SpoolingStore
from kernelscope.server.web.appstate import app_state

# Strings that look like an element's start from inside a string or a nested value.
TRICKY = ['}, {"stage": "done"}', '{', '}, {}', ', {"a": [', '\\", {', '[{', '"}]']


def _events(extra: Any = None) -> list[dict[str, Any]]:
    done = {"schema": 1, "seq": 2, "stage": "done", "ms": 0.0,
            "data": {"ok": True, "follow_ups": ["inductor"], "follow_ups_until": 4e9,
                     "nested": [{"a": {"b": TRICKY}}, {"c": []}], "extra": extra}}
    return [{"schema": 1, "seq": 0, "stage": "source", "ms": 1.0,
             "data": {"code": "x = {1: [{}, {2: 3}]}  # " + " ".join(TRICKY)}},
            {"schema": 1, "seq": 1, "stage": "capture", "ms": 2.0,
             "data": {"graphs": [{"id": 0, "nodes": [{"name": "}, {"}]}]}},
            done]


def _text(rnd: random.Random) -> str:
    """A short string, often of the characters that look like JSON's structure."""
    alphabet = '{}[],:" \\ab' if rnd.random() < 0.7 else "xyzé\n\u2028"
    return "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(5)))


def _value(rnd: random.Random, depth: int = 0) -> Any:
    """A random JSON value: scalars, strings of JSON's own characters, nested lists and
    objects (a seeded fuzz: the same values every run)."""
    kind = rnd.randrange(8 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.random() < 0.5
    if kind == 2:
        return rnd.randrange(-10**6, 10**6)
    if kind == 3:
        return rnd.uniform(-1e9, 1e9)
    if kind in (4, 5):
        return _text(rnd)
    if kind == 6:
        return [_value(rnd, depth + 1) for _ in range(rnd.randrange(5))]
    return {_text(rnd): _value(rnd, depth + 1) for _ in range(rnd.randrange(5))}


def test_the_last_element_is_read_from_the_tail_alone() -> None:
    rnd = random.Random(0)
    for _ in range(300):
        before = [_value(rnd) for _ in range(rnd.randrange(5))]
        last = {_text(rnd): _value(rnd) for _ in range(rnd.randrange(5))}
        assert last_element(json.dumps([*before, last])) == last, (before, last)
        assert last_element(json.dumps([*before, last], indent=1)) == last, (before, last)


def test_the_last_element_is_none_when_not_an_object() -> None:
    assert last_element("[]") is None
    assert last_element(json.dumps([{"a": 1}, [{"b": 2}]])) is None
    assert last_element(json.dumps([{"a": 1}, "}, {\"b\": 2}"])) is None


def test_done_and_what_follows_it() -> None:
    events = _events()
    later = {"schema": 1, "seq": 3, "stage": "inductor", "ms": 0.0, "data": {}}
    head = StoredHead({"id": "x"}, "{}", json.dumps(events), (json.dumps(later),))
    assert head.from_done() == [events[-1], later]
    assert json.loads(head.text(follow_ups={}))["events"] == [*events, later]
    # `done` not last in the row: the row is decoded whole.
    moved = StoredHead({"id": "x"}, "{}", json.dumps([events[0], events[2], events[1]]))
    assert moved.from_done() == [events[2], events[1]]
    assert StoredHead({"id": "x"}, "{}", json.dumps(events[:2])).from_done() == []
    assert json.loads(StoredHead({"id": "x"}, "{}", "[]", (json.dumps(later),)).text()) \
        == {"id": "x", "options": {}, "events": [later]}


@pytest.mark.parametrize("backend", ["embedded", "postgres"], indirect=True)
@pytest.mark.parametrize("parted", [False, True], ids=["whole", "split"])
def test_the_trace_route_answers_the_head_with_its_events_as_stored(
        make_app: Any, backend: str, parted: bool) -> None:
    app = make_app()
    with app.app_context():
        store = app_state().store
    events = _events()
    given_events = split(events) if parted else events
    ident = store.put("code = 1", {"device": "cpu", "n": [1, {"x": None}]}, given_events, True)
    later = {"schema": 1, "seq": 3, "stage": "inductor", "ms": 5.0, "data": {"k": "}, {"}}
    store.add_follow_up(ident, later)
    answer = app.test_client().get(f"/api/traces/{ident}")
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    head = store.head(ident)
    assert head is not None and bool(head["parts"]) == parted
    assert answer.get_json() == {**head, "follow_ups": states(head)}
    assert answer.get_json()["follow_ups"] == {"inductor": "done"}
    # The row's own text, never decoded and encoded again (keys keep their stored order).
    row = store.stored_head(ident)
    assert row is not None and row.events[:-1] in answer.get_data(as_text=True)
    polled = app.test_client().get(f"/api/traces/{ident}/follow-ups").get_json()
    assert polled == {"follow_ups": {"inductor": "done"}, "events": [later]}


def test_a_spooled_trace_is_served_as_a_stored_one(tmp_path: Any) -> None:
    spool = SpoolingStore(down_store(tmp_path / "t.sqlite3"), tmp_path / "spool")
    ident = spool.put("code = 1", {}, _events(), True)
    head = spool.head(ident)
    row = spool.stored_head(ident)
    assert head is not None and row is not None
    assert json.loads(row.text(follow_ups=states(head))) == {**head, "follow_ups":
                                                            {"inductor": "running"}}
    assert spool.stored_head("nosuchtrace0") is None
