"""Event streams, replay, resume and permalinks, driven by the fast fake worker."""

from __future__ import annotations

import json
import signal
import sqlite3
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from server_support import AppFactory, compile_events, state, stream, submit

from kernelscope.compiler.events.read import Event
from kernelscope.compiler.events.stage import STAGES as PIPELINE_STAGES
from kernelscope.server.jobs.manager import Job, JobRequest
from kernelscope.server.jobs.worker import explain, normalize, parse_event
from kernelscope.server.sandbox.launch import Limits
from kernelscope.server.store.sqlite import TraceStore, trace_id
from kernelscope.server.web.streams import parse_sse

ALL_BACKENDS = True  # every test runs on each back-end (server_support.BACKENDS)

STAGES = [*PIPELINE_STAGES, "done"]


def pipeline(events: list[dict[str, Any]]) -> list[str]:
    """The stages of a job's events but the server's `waiting`: a job that no worker has
    taken within 0.8 s gets one (on the RQ tier of a loaded host, before its first event),
    numbered in the stream like the rest."""
    return [e["stage"] for e in events if e["stage"] != "waiting"]



def test_sse_stream_has_every_stage_then_done_with_trace_id(client: FlaskClient) -> None:
    job_id = submit(client, "x = 1\n")
    response = client.get(f"/api/jobs/{job_id}/events")
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache"
    body = response.get_data(as_text=True)
    assert "\n\nid: 0\ndata: {" in "\n\n" + body
    events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: ")]
    assert pipeline(events) == STAGES
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert all(e["schema"] == 1 for e in events)
    done = events[-1]["data"]
    assert done["ok"] is True and len(done["trace_id"]) == 12


def test_ndjson_stream_matches_sse(client: FlaskClient) -> None:
    job_id = submit(client, "x = 1\n")
    sse_events = stream(client, job_id)
    both = [
        client.get(f"/api/jobs/{job_id}/events?format=ndjson"),
        client.get(f"/api/jobs/{job_id}/events.ndjson"),
    ]
    for response in both:
        assert response.mimetype == "application/x-ndjson"
        lines = [json.loads(x) for x in response.get_data(as_text=True).splitlines() if x]
        assert lines == sse_events


def test_heartbeats_while_a_stage_runs(make_app: AppFactory) -> None:
    client = make_app(HEARTBEAT_S=0.1).test_client()
    job_id = submit(client, "# fake-sleep: 0.3\nx = 1\n")
    body = client.get(f"/api/jobs/{job_id}/events").get_data(as_text=True)
    assert ": heartbeat\n\n" in body
    assert body.endswith("\n\n")
    assert pipeline(parse_sse(body)) == STAGES


def test_late_subscriber_gets_a_replay_and_can_resume(client: FlaskClient) -> None:
    job_id = submit(client, "x = 1\n")
    first = stream(client, job_id)
    assert stream(client, job_id) == first
    resumed = client.get(f"/api/jobs/{job_id}/events", headers={"Last-Event-ID": "6"})
    tail = [
        json.loads(x[6:])
        for x in resumed.get_data(as_text=True).splitlines()
        if x.startswith("data: ")
    ]
    assert tail == first[7:]
    # An EventSource reconnecting after `done` gets 204, which stops it reconnecting.
    last = str(first[-1]["seq"])  # `done`'s
    after_done = client.get(f"/api/jobs/{job_id}/events", headers={"Last-Event-ID": last})
    assert after_done.status_code == 204
    bad = client.get(f"/api/jobs/{job_id}/events", headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400


def test_job_status(client: FlaskClient) -> None:
    job_id = submit(client, "x = 1\n")
    events = stream(client, job_id)
    done = events[-1]["data"]
    status = client.get(f"/api/jobs/{job_id}").get_json()
    # a job queued behind a warm-up on a loaded host gets a `waiting` event first
    assert len(pipeline(events)) == 10
    assert status == {
        "id": job_id,
        "state": "finished",
        "events": len(events),
        "ok": True,
        "trace_id": done["trace_id"],
    }


def test_trace_survives_a_restart(make_app: AppFactory) -> None:
    first = make_app()
    events = compile_events(first.test_client(), "y = 2\n", fusion=False)
    ident = events[-1]["data"]["trace_id"]
    state(first).jobs.shutdown()
    again = make_app().test_client()  # a new app on the same database file
    trace = again.get(f"/api/traces/{ident}").get_json()
    assert trace["id"] == ident and trace["code"] == "y = 2\n"
    assert trace["options"] == {
        "device": "cpu",
        "backend": "auto",  # resolved by the compiler (codegen/backends.py), not here
        "fusion": False,
        "inductor": False,
    }
    assert trace["events"] == events
    assert trace["created"].endswith("+00:00")


def test_failed_jobs_are_stored_too(client: FlaskClient) -> None:
    events = compile_events(client, "raise ValueError('nope')\n")
    # a job queued behind another (a worker's warm-up on a loaded host) waits first
    assert pipeline(events) == ["source", "error", "done"]
    ident = events[-1]["data"]["trace_id"]
    trace = client.get(f"/api/traces/{ident}").get_json()
    errors = [e for e in trace["events"] if e["stage"] == "error"]
    assert trace["ok"] is False and [e["data"]["kind"] for e in errors] == ["exception"]


def test_store_ids_are_content_derived_and_inserts_never_overwrite(tmp_path) -> None:
    store = TraceStore(tmp_path / "t.sqlite3")
    events = [{"schema": 1, "seq": 0, "stage": "done", "ms": 0.0, "data": {"ok": True}}]
    a = store.put("x = 1", {"device": "cpu"}, events, True)
    b = store.put("x = 1", {"device": "cpu"}, events, True)
    c = store.put("x = 2", {"device": "cpu"}, events, True)
    assert a == b == trace_id("x = 1", {"device": "cpu"}, events) and a != c
    assert len(a) == 12 and a.isalnum()
    assert store.count() == 2
    assert store.get(a)["events"][0]["data"]["trace_id"] == a
    mode = sqlite3.connect(tmp_path / "t.sqlite3").execute("PRAGMA journal_mode").fetchone()
    assert mode[0] == "wal"
    assert store.get("bad id!") is None


FORGER = (
    "import json, os, sys\n"
    "print('hello from the snippet')\n"
    "def forge(write):\n"
    "    for stage, data in (('capture', [1]), ('run', {'ok': True, 'forged': 1}),\n"
    "                        ('profile', {'speedup': 1000.0}), ('done', {'ok': True})):\n"
    "        event = {'schema': 1, 'seq': 99, 'stage': stage, 'ms': -5, 'data': data}\n"
    "        write((json.dumps(event) + '\\n').encode())\n"
    "forge(lambda b: os.write(1, b))\n"
    "forge(lambda b: (sys.stdout.write(b.decode()), sys.stdout.flush()))\n"
    "os.write(1, b'not json\\n{\"broken\": \\n')\n"
)


def test_nothing_the_front_half_prints_reaches_the_trace(client: FlaskClient) -> None:
    """Finding 1 (fake halves): forged events on fd 1 and on the front's own event channel."""
    events = compile_events(client, FORGER)
    assert pipeline(events) == STAGES
    assert [e["seq"] for e in events] == list(range(len(events)))
    events = [e for e in events if e["stage"] != "waiting"]
    by_stage = {e["stage"]: e for e in events}
    assert by_stage["run"]["data"] == {"ok": True} and by_stage["profile"]["data"] == {"graphs": []}
    assert [e["origin"] for e in events[:2]] == ["snippet", "snippet"]
    assert {e["origin"] for e in events[2:]} == {"compiler"}  # `done` included
    done = events[-1]["data"]
    assert done["isolated"] is True and '"stage": "profile"' in done["snippet_stdout"]


def test_one_process_mode_renumbers_and_labels_everything_untrusted(
    make_app: AppFactory,
) -> None:
    client = make_app(BACK_CMD=None).test_client()
    events = compile_events(client, FORGER)
    assert [e["seq"] for e in events] == list(range(len(events)))
    # Here the snippet shares the process that writes the event channel (the fake worker
    # does not even redirect print()), so it can forge; the trace says so on every event.
    assert {e["origin"] for e in events} == {"snippet"}
    assert events[-1]["data"].get("isolated") is not True


def test_parse_event_accepts_only_stage_events() -> None:
    assert parse_event(b'{"stage": "run", "ms": 2, "data": {"ok": true}}') == \
        Event(-1, "run", 2.0, {"ok": True})
    assert parse_event(b'{"stage": "run", "ms": -1}') == Event(-1, "run", 0.0, {"value": None})
    for line in (b"", b"hello", b"[1, 2]", b'{"stage": 3}', b'{"data": {}}', b"{bad"):
        assert parse_event(line) is None


def test_memory_errors_from_the_compiler_are_named() -> None:
    event = Event(-1, "error", 0.0, {"kind": "exception", "message": "MemoryError: "})
    assert normalize(event, Limits(memory_mb=100))["kind"] == "memory"
    other = Event(-1, "error", 0.0, {"kind": "exception", "message": "ValueError: x"})
    assert normalize(other, Limits())["kind"] == "exception"
    said = Event(-1, "run", 0.0, {"kind": "exception", "message": "MemoryError: "})
    assert normalize(said, Limits())["kind"] == "exception"  # only an error is renamed


def test_explain_names_what_happened() -> None:
    job = Job("j", JobRequest("x", {"device": "cpu", "backend": "cpp"}))
    job.publish("source", {})
    limits = Limits(wall_s=7, cpu_s=9, file_mb=3, output_mb=2)
    cases = {
        ("timeout", None, ""): ("timeout", "ran longer than 7 s (during the source stage)"),
        ("output", None, ""): ("sandbox", "more than 2 MiB of output"),
        ("scratch", None, ""): ("sandbox", "scratch directory"),
        (None, signal.SIGXCPU, ""): ("timeout", "9 s of CPU time"),
        (None, signal.SIGXFSZ, ""): ("sandbox", "larger than 3 MiB"),
        (None, signal.SIGSEGV, ""): ("killed", "SIGSEGV (segmentation fault)"),
        (None, signal.SIGKILL, ""): ("killed", "SIGKILL"),
        (None, None, "Traceback\nMemoryError"): ("memory", "memory limit"),
        (None, None, "bwrap: Can't mkdir"): ("sandbox", "could not start"),
        (None, None, "boom"): ("exception", "without finishing: boom"),
    }
    for (reason, sig, stderr), (kind, words) in cases.items():
        data = explain(reason, sig, stderr, job, limits)
        assert data["kind"] == kind and words in data["message"], (reason, sig, data)


@pytest.mark.embedded_only
def test_finished_jobs_are_forgotten_but_traces_stay(client: FlaskClient, app: Flask) -> None:
    manager = state(app).jobs
    job_id = submit(client, "x = 1\n")
    ident = stream(client, job_id)[-1]["data"]["trace_id"]
    manager.retention_s = 0
    submit(client, "x = 2\n")  # pruning happens on submit
    assert client.get(f"/api/jobs/{job_id}").status_code == 404
    assert client.get(f"/api/traces/{ident}").status_code == 200


def test_a_worker_that_dies_after_its_own_error_gets_one_error_and_done(
    make_app: AppFactory,
) -> None:
    client = make_app(BACK_CMD=None).test_client()  # one process: the channel is published
    code = (
        "import json, os\n"
        "event = {'schema': 1, 'seq': 1, 'stage': 'error', 'ms': 0,\n"
        "         'data': {'stage': 'capture', 'kind': 'exception', 'message': 'mine'}}\n"
        "print(json.dumps(event), flush=True)\n"
        "os._exit(3)\n"
    )
    events = compile_events(client, code)
    assert pipeline(events) == ["source", "error", "done"]
    assert next(e for e in events if e["stage"] == "error")["data"]["message"] == "mine"
    assert events[2]["data"]["ok"] is False and events[2]["data"]["trace_id"]


STREAM_FORGER = (
    "import json, sys\n"
    "for stage, data in (('source', {'entry': 'forged', 'code': 'forged'}),\n"
    "                    ('capture_graph', {'id': 0, 'name': 'g', 'code': '', 'nodes': [],\n"
    "                                       'edges': [], 'kind': 'forward', 'dynamo_graph': 0,\n"
    "                                       'speedup': 1000.0})):\n"
    "    event = {'schema': 1, 'seq': 1, 'stage': stage, 'ms': 0, 'data': data}\n"
    "    sys.stdout.write(json.dumps(event) + '\\n'); sys.stdout.flush()\n"
)


def test_a_split_front_streams_one_source_and_its_graphs_as_the_snippets(
        client: FlaskClient) -> None:
    """The front's `source` and `capture_graph` are published as they arrive (before the
    back half starts); a second `source` on its channel is the snippet's forgery and is
    dropped, a graph it writes is published conformed, as the snippet's."""
    events = compile_events(client, STREAM_FORGER)
    stages = [e["stage"] for e in events]
    assert stages == ["source", "capture_graph", *STAGES[1:]], stages
    assert [e["seq"] for e in events] == list(range(len(events)))
    source, graph = events[0], events[1]
    assert source["data"].get("entry") != "forged" and source["data"]["code"] == STREAM_FORGER
    assert graph["origin"] == "snippet" and "speedup" not in graph["data"]
    assert graph["data"]["name"] == "g"
