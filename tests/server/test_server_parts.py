"""A big trace is stored and served in parts (issue 26 item 1, issue 30 item 2): the
GPT-2-small-shaped training step (tests/browser/fixtures/gpt2_train.json.gz, 14.2 MB of
events, over TRACE_LIMIT_MB) goes into the store through the job path (the relay's caps,
then `finish`) and the upload path, is served as its head and one part per graph, read
back whole by the server's own readers, and a part over the limit is still refused."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from server_support import REPO, down_store, relay_bytes

from kernelscope.compiler.events.stage import SCHEMA_VERSION
from kernelscope.compiler.trace.reader import FORMAT, VERSION
from kernelscope.server.config import default_config
from kernelscope.server.jobs.finish import finish
from kernelscope.server.jobs.manager import Job, JobRequest
from kernelscope.server.jobs.relay import Relay
from kernelscope.server.sandbox.launch import Limits
from kernelscope.server.store.parts import GRAPH_STAGES, split
from kernelscope.server.web.appstate import app_state

GPT2 = REPO / "tests" / "browser" / "fixtures" / "gpt2_train.json.gz"
MiB = 1 << 20
LIMIT = 8 * MiB  # TRACE_LIMIT_MB's default


@pytest.fixture(scope="module")
def gpt2() -> dict[str, Any]:
    """The fixture as a job hands it to the store: `done` without its id."""
    trace: dict[str, Any] = json.loads(gzip.open(GPT2).read())
    done = trace["events"][-1]
    trace["events"][-1] = {**done, "data": {k: v for k, v in done["data"].items()
                                            if k != "trace_id"}}
    return trace


def _store(app: Any) -> Any:
    with app.app_context():
        return app_state().store


def _put(app: Any, trace: dict[str, Any]) -> str:
    return str(_store(app).put(trace["code"], trace["options"], trace["events"], True))


@pytest.mark.parametrize("backend", ["embedded", "postgres"], indirect=True)
def test_a_big_trace_is_served_as_its_head_and_one_part_per_graph(
        make_app: Any, backend: str, gpt2: dict[str, Any]) -> None:
    assert len(json.dumps(gpt2["events"])) > LIMIT  # why it is stored in parts at all
    app = make_app()
    ident = _put(app, gpt2)
    client = app.test_client()
    answer = client.get(f"/api/traces/{ident}")
    assert answer.status_code == 200
    head = answer.get_json()
    assert len(answer.data) < 1 * MiB, len(answer.data)
    assert sorted(head["parts"]) == ["g0", "g1", "g2"]
    capture = next(e["data"] for e in head["events"] if e["stage"] == "capture")
    assert [(g["id"], g["part"], g["kind"]) for g in capture["graphs"]] == \
        [(0, "g0", "forward"), (1, "g1", "backward"), (2, "g2", "inference")]
    assert capture["graphs"][0]["lengths"]["nodes"] > 100 and "nodes" not in capture["graphs"][0]
    assert head["events"][-1]["data"]["trace_id"] == ident
    whole = {e["stage"]: e["data"] for e in gpt2["events"]}
    for gid in range(3):
        part = client.get(f"/api/traces/{ident}/parts/g{gid}")
        assert part.status_code == 200 and len(part.data) < LIMIT, len(part.data)
        assert part.headers["Content-Type"] == "application/json"
        got = part.get_json()["graphs"]
        assert sorted(got) == sorted(GRAPH_STAGES)
        for stage in GRAPH_STAGES:
            assert got[stage] == [whole[stage]["graphs"][gid]]
        assert client.get(f"/api/traces/{ident}/graphs/{gid}").data == part.data
    assert client.get(f"/api/traces/{ident}/parts/g9").status_code == 404
    assert client.get(f"/api/traces/{ident}/parts/..%2Fx").status_code == 404
    assert client.get(f"/api/traces/{ident}/graphs/7").status_code == 404
    # The server's own readers get it whole, the same events it was given.
    back = _store(app).get(ident)["events"]
    back[-1]["data"].pop("trace_id")
    assert json.dumps(back, sort_keys=True) == json.dumps(gpt2["events"], sort_keys=True)
    assert _put(app, gpt2) == ident and _store(app).count() == 1  # one id for one content
    diff = client.get(f"/api/diff/{ident}/{ident}")
    assert diff.status_code == 200 and len(diff.get_json()["groups"]) > 100
    follow = client.get(f"/api/traces/{ident}/follow-ups")
    assert follow.status_code == 200 and follow.get_json()["events"] == []


def test_a_trace_stored_whole_before_parts_existed_still_opens(make_app: Any) -> None:
    """A database written before `trace_parts` existed: its rows are served as they were."""
    app = make_app()
    path = Path(app.config["DATABASE"])
    old = {"schema": SCHEMA_VERSION, "seq": 0, "stage": "done", "ms": 0.0,
           "data": {"ok": True, "trace_id": "oldtrace0001"}}
    with sqlite3.connect(path) as conn:  # as the old store wrote it: only `traces`
        conn.execute("DROP TABLE trace_parts")
        conn.execute("INSERT INTO traces VALUES (?, ?, ?, ?, ?, ?)",
                     ("oldtrace0001", "2026-12-01T00:00:00+00:00", 1, "x = 1", "{}",
                      json.dumps([old])))
    client = make_app().test_client()  # a restart: the table is made, nothing else moves
    trace = client.get("/api/traces/oldtrace0001").get_json()
    assert trace["events"] == [old] and trace["parts"] == {} and trace["code"] == "x = 1"
    assert client.get("/api/traces/oldtrace0001/parts/g0").status_code == 404


def _lines(events: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def _relay(events: list[dict[str, Any]], trace_mb: int = 8) -> tuple[Any, Job]:
    """The events as a worker writes them, read by the server's relay under its caps."""
    limits = Limits.from_config({**default_config(), "TRACE_LIMIT_MB": trace_mb,
                                 "OUTPUT_LIMIT_MB": 32})
    job = Job("j", JobRequest("x = 1", {}, None))
    relay = Relay(job, limits, lambda e, _: e.data,
                  lambda stage, data, ms: job.publish(stage, data, ms=ms), lambda: False)
    return relay_bytes(relay, _lines(events), 120), job


def test_the_job_path_stores_a_big_trace_in_parts(make_app: Any, gpt2: dict[str, Any]) -> None:
    """A worker's 14.2 MB of events pass the relay (each graph's part and the head within
    TRACE_LIMIT_MB) and `finish` stores them in parts under the permalink it publishes."""
    outcome, job = _relay(gpt2["events"])
    assert outcome.reason is None and outcome.done is not None, outcome
    assert len(job.events) == len(gpt2["events"]) - 1
    app = make_app()
    store = _store(app)
    finish(job, store, outcome.done)
    ident = job._done["data"]["trace_id"] if job._done else None  # type: ignore[index]
    assert ident and store.head(ident)["parts"].keys() == {"g0", "g1", "g2"}
    assert [e["stage"] for e in store.get(ident)["events"]] == \
        [e["stage"] for e in gpt2["events"]]


@pytest.mark.parametrize("backend", ["embedded", "redis"], indirect=True)
def test_a_job_of_a_model_sized_trace_is_stored_in_parts(make_app: Any, backend: str,
                                                         gpt2: dict[str, Any]) -> None:
    """The whole job path: a sandboxed worker (tests/server/fake_worker.py) writes the GPT-2
    step's events, front half and back half, and the permalink `done` names is the trace
    in parts; on the RQ tier too (an RQ worker through Redis, the trace in PostgreSQL)."""
    from server_support import compile_events

    app = make_app(JOB_TIMEOUT_S=120)
    events = compile_events(app.test_client(), "x = 1  # fake-trace: gpt2_train\n")
    done = events[-1]
    assert done["stage"] == "done" and done["data"]["ok"], [e["stage"] for e in events]
    ident = done["data"]["trace_id"]
    head = app.test_client().get(f"/api/traces/{ident}").get_json()
    assert sorted(head["parts"]) == ["g0", "g1", "g2"]
    stored = _store(app).get(ident)["events"]
    codegen = next(e["data"] for e in stored if e["stage"] == "codegen")
    assert [len(g["kernels"]) for g in codegen["graphs"]] == [100, 129, 296]


def test_a_graph_over_the_limit_stops_the_job_naming_the_limit(gpt2: dict[str, Any]) -> None:
    """Parts are counted per graph: with TRACE_LIMIT_MB 5, graph 2 (the AdamW step, 5.3 MiB
    in its part) stops the job, though every other graph and the head fit."""
    outcome, _ = _relay(gpt2["events"], trace_mb=5)
    assert outcome.reason == "part", outcome
    from kernelscope.server.jobs.why import _stopped_by_us

    words = _stopped_by_us("part", Limits(trace_mb=5), "codegen")
    assert words is not None and "5 MiB (TRACE_LIMIT_MB" in words[1] and "graph" in words[1]


def _files(trace: dict[str, Any]) -> list[dict[str, str]]:
    """The trace as a recorded run's directory holds it: one file per graph."""
    by = {e["stage"]: e["data"] for e in trace["events"]}
    out = []
    for i, g in enumerate(by["capture"]["graphs"]):
        record = {
            "format": FORMAT, "version": VERSION, "schema": SCHEMA_VERSION,
            "versions": by["source"]["versions"], "created": "2026-12-06T00:00:00Z",
            "seq": i, "kind": g.get("kind") or "inference", "options": {"device": "cpu"},
            "compile_id": g.get("compile_id"), "dynamo_graph": g.get("dynamo_graph", 0),
            "recompile": False, "reasons": [], "graph_break": None, "graph_break_site": None,
            "call_site": None, "compile_call": None, "config": {}, "filename": "/u/gpt2.py",
            "code": trace["code"], "ms": {},
            "stages": {s: by[s]["graphs"][i] for s in GRAPH_STAGES}}
        out.append({"name": f"{i:04d}_graph.json", "text": json.dumps(record)})
    return out


def test_an_upload_of_a_big_run_is_stored_in_parts(make_app: Any, gpt2: dict[str, Any]) -> None:
    client = make_app().test_client()
    answer = client.post("/api/traces", json={"files": _files(gpt2)})
    assert answer.status_code == 201, answer.get_json()
    body = answer.get_json()
    assert body["graphs"] == 3
    head = client.get(f"/api/traces/{body['id']}").get_json()
    assert sorted(head["parts"]) == ["g0", "g1", "g2"]
    part = client.get(f"/api/traces/{body['id']}/parts/g2").get_json()
    assert len(part["graphs"]["codegen"][0]["kernels"]) == \
        len(next(e for e in gpt2["events"] if e["stage"] == "codegen")["data"]["graphs"][2]
            ["kernels"])


def test_an_upload_whose_graph_is_over_the_limit_is_refused(
        make_app: Any, gpt2: dict[str, Any]) -> None:
    client = make_app(TRACE_LIMIT_MB=5).test_client()
    answer = client.post("/api/traces", json={"files": _files(gpt2)})
    assert answer.status_code == 400, answer.get_json()
    error = answer.get_json()["error"]
    assert "its part g2 is 5." in error and "trace limit of 5 MiB (TRACE_LIMIT_MB" in error
    assert client.get("/api/health").get_json()["traces"] == 0


def test_split_keys_and_ids(make_app: Any, gpt2: dict[str, Any]) -> None:
    """A writer may key parts its own way (a TORCH_TRACE log: by compile id) and store the
    Split; the same content always splits the same way."""
    by_compile = split(gpt2["events"], key=lambda g: f"c{g['compile_id'].replace('/', '-')}")
    assert sorted(by_compile.parts) == ["c1-0", "c4-0"]
    assert split(gpt2["events"]).parts == split(gpt2["events"]).parts
    with pytest.raises(ValueError, match="part key"):
        split(gpt2["events"], key=lambda g: "a/b")
    app = make_app()
    ident = _store(app).put(gpt2["code"], gpt2["options"], by_compile, True)
    client = app.test_client()
    assert sorted(client.get(f"/api/traces/{ident}").get_json()["parts"]) == ["c1-0", "c4-0"]
    forward = client.get(f"/api/traces/{ident}/graphs/1").get_json()  # in compile 1/0
    assert [g["id"] for g in forward["graphs"]["lowering"]] == [0, 1]
    assert client.get(f"/api/traces/{ident}/graphs/2").data == \
        client.get(f"/api/traces/{ident}/parts/c4-0").data


def test_a_big_trace_spooled_while_the_database_is_down_is_served_and_written_later(
        tmp_path: Path, gpt2: dict[str, Any]) -> None:
    from kernelscope.server.store.spool import SpoolingStore

    inner = down_store(tmp_path / "traces.sqlite3")
    store = SpoolingStore(inner, tmp_path / "spool")
    ident = store.put(gpt2["code"], gpt2["options"], gpt2["events"], True)
    assert store.spooled() == [ident] and not inner.exists(ident)
    head = store.head(ident)
    assert head is not None and sorted(head["parts"]) == ["g0", "g1", "g2"]
    assert json.loads(store.part(ident, "g1") or "{}")["graphs"]["capture"][0]["id"] == 1
    whole = store.get(ident)
    assert whole is not None and len(json.dumps(whole["events"])) > LIMIT
    inner.down = False
    assert store.flush(force=True) == 1 and store.spooled() == []
    assert inner.head(ident)["parts"] == head["parts"]  # type: ignore[index]
    assert inner.part(ident, "g1") == store.part(ident, "g1")


def test_kernelscope_open_stores_a_big_run_in_parts(tmp_path: Path, gpt2: dict[str, Any],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`kernelscope open DIR` with no server running stores the run in its own database."""
    from kernelscope.server.open_cmd import _store_locally
    from kernelscope.server.store.sqlite import TraceStore

    files = [(f["name"], f["text"].encode()) for f in _files(gpt2)]
    database = str(tmp_path / "traces.sqlite3")
    code, _ = _store_locally(files, database, serve=False, browser=False)
    assert code == 0
    ident = capsys.readouterr().out.strip().rsplit("/t/", 1)[1]
    assert sorted(TraceStore(database).head(ident)["parts"]) == ["g0", "g1", "g2"]  # type: ignore[index]
