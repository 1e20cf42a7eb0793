"""A big trace stored whole is served in parts when a client asks (`?split=1`,
server/store/readsplit.py): the 6-block training step (tests/browser/fixtures/
llama6_train.json.gz, 3.2 MB of events, under the 4 MiB at which a trace is stored in
parts) answers as its head and one part per graph; its parts merged back are the stored
events byte for byte; a small trace, or a client that does not ask, gets the trace as
stored; the splits kept stay within their budget."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest
from server_support import REPO

from kernelscope.server.store.parts import GRAPH_STAGES, WHOLE_BYTES, merge
from kernelscope.server.store.raw import StoredHead
from kernelscope.server.store.readsplit import READ_SPLIT_CHARS, ReadSplits
from kernelscope.server.web.appstate import app_state

LLAMA6 = REPO / "tests" / "browser" / "fixtures" / "llama6_train.json.gz"


@pytest.fixture(scope="module")
def llama6() -> dict[str, Any]:
    trace: dict[str, Any] = json.loads(gzip.open(LLAMA6).read())
    done = trace["events"][-1]
    trace["events"][-1] = {**done, "data": {k: v for k, v in done["data"].items()
                                            if k != "trace_id"}}
    return trace


def _put(app: Any, trace: dict[str, Any], code: str | None = None) -> str:
    with app.app_context():
        store = app_state().store
        return str(store.put(code or trace["code"], trace["options"], trace["events"], True))


@pytest.mark.parametrize("backend", ["embedded", "postgres"], indirect=True)
def test_a_big_trace_stored_whole_is_served_in_parts_when_asked(
        make_app: Any, backend: str, llama6: dict[str, Any]) -> None:
    size = len(json.dumps(llama6["events"]))
    assert READ_SPLIT_CHARS < size <= WHOLE_BYTES  # stored whole, served split
    app = make_app()
    ident = _put(app, llama6)
    client = app.test_client()
    plain = client.get(f"/api/traces/{ident}")
    assert plain.get_json()["parts"] == {}  # the page, the diff: as stored
    answer = client.get(f"/api/traces/{ident}?split=1")
    assert answer.status_code == 200
    head = answer.get_json()
    assert len(answer.data) < size / 8, len(answer.data)
    assert sorted(head["parts"]) == ["g0", "g1"]
    capture = next(e["data"] for e in head["events"] if e["stage"] == "capture")
    assert [(g["id"], g["part"], g["kind"]) for g in capture["graphs"]] == \
        [(0, "g0", "forward"), (1, "g1", "backward")]
    assert head["events"][-1]["data"]["trace_id"] == ident
    assert {k: v for k, v in head.items() if k not in ("events", "parts")} == \
        {k: v for k, v in plain.get_json().items() if k not in ("events", "parts")}
    for key, length in head["parts"].items():
        part = client.get(f"/api/traces/{ident}/parts/{key}?split=1")
        assert part.status_code == 200 and len(part.data) == length
        assert part.headers["Cache-Control"].endswith("immutable")
        assert sorted(part.get_json()["graphs"]) == sorted(GRAPH_STAGES)
        # A client that did not ask for parts is not split for (the page reads g0 early).
        assert client.get(f"/api/traces/{ident}/parts/{key}").status_code == 404
        merge(head["events"], part.get_json())
    assert json.dumps(head["events"]) == json.dumps(plain.get_json()["events"])
    assert client.get(f"/api/traces/{ident}/parts/g7?split=1").status_code == 404
    assert client.get("/api/traces/nosuchtrace1/parts/g0?split=1").status_code == 404
    assert client.get("/api/traces/nosuchtrace1?split=1").status_code == 404


def test_a_small_trace_is_answered_as_stored_and_follow_ups_stay(
        make_app: Any, llama6: dict[str, Any]) -> None:
    app = make_app()
    small = {**llama6, "events": [e for e in llama6["events"]
                                  if e["stage"] in ("source", "done")]}
    ident = _put(app, small)
    client = app.test_client()
    assert client.get(f"/api/traces/{ident}?split=1").data == \
        client.get(f"/api/traces/{ident}").data
    assert client.get(f"/api/traces/{ident}/parts/g0?split=1").status_code == 404
    big = _put(app, llama6)
    follow = {"schema": 1, "seq": 99, "stage": "inductor", "ms": 1.0, "data": {"ok": True}}
    with app.app_context():
        app_state().store.add_follow_up(big, follow)
    head = client.get(f"/api/traces/{big}?split=1").get_json()
    assert head["events"][-1] == follow and head["parts"]


class Counting:
    """A store of whole traces that counts its reads."""

    def __init__(self, rows: dict[str, str]) -> None:
        self.rows, self.reads = rows, 0

    def stored_head(self, ident: str) -> StoredHead | None:
        self.reads += 1
        return StoredHead({"id": ident, "parts": {}}, "{}", self.rows[ident])


def test_splits_are_kept_within_their_budget(llama6: dict[str, Any]) -> None:
    events = json.dumps(llama6["events"])
    store: Any = Counting({"a" * 12: events, "b" * 12: events})
    splits = ReadSplits(budget=len(events))  # room for one split (2.4 of 3.2 MB)
    first = splits.head(store, "a" * 12)
    assert first is not None and first.fields["parts"]
    g0 = splits.part(store, "a" * 12, "g0")
    assert g0 is not None and store.reads == 1  # the part from the split kept
    assert splits.part(store, "b" * 12, "g1") is not None and store.reads == 2
    assert splits.part(store, "b" * 12, "g9") is None and store.reads == 2
    assert splits.part(store, "a" * 12, "g0") == g0 and store.reads == 3  # a's was dropped
