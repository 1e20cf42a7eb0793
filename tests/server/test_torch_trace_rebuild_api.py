"""The one-click recompile of a logged graph, through the server and the real compiler: a
TORCH_TRACE log's stored trace (fixtures/torch_trace.json, opened from a real log) gives a
graph's snippet (GET /api/traces/<id>/graphs/<g>/rebuild), the page compiles it as any snippet
(POST /api/compile: a sandboxed job), and GET /api/diff/<job's trace>/<log's trace> matches
our kernels with Inductor's logged ones for that graph by FX node."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from server_support import ISOLATION, REAL_BACK, REAL_WORKER, needs_real_cli, state, stream, submit

from kernelscope.server import create_app
from kernelscope.server.web.appstate import app_state

pytestmark = needs_real_cli
FIXTURE = Path(__file__).resolve().parents[1] / "browser" / "fixtures" / "torch_trace.json"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Flask]:
    app = create_app({"DATABASE": str(tmp_path / "traces.sqlite3"), "WORKER_CMD": REAL_WORKER,
                      "BACK_CMD": REAL_BACK, "JOB_TIMEOUT_S": 240, "WORKER_THREADS": 2,
                      "ISOLATION": ISOLATION, "EARLY_SOURCE": False})
    yield app
    state(app).jobs.shutdown()


def test_a_logged_graph_is_rebuilt_as_a_job_and_compared_with_inductors_kernels(
        app: Flask) -> None:
    stored = json.loads(FIXTURE.read_text())
    with app.app_context():
        log = app_state().store.put(stored["code"], stored["options"], stored["events"], True)
    client = app.test_client()
    capture = next(e["data"] for e in stored["events"] if e["stage"] == "capture")
    graph = next(g for g in capture["graphs"] if g["compile_id"] == "0/0")
    answer = client.get(f"/api/traces/{log}/graphs/{graph['id']}/rebuild")
    assert answer.status_code == 200, answer.get_json()
    code = answer.get_json()["code"]
    assert code.startswith(f"# Rebuilt by Kernelscope from the TORCH_TRACE log of trace {log}")
    events = stream(client, submit(client, code))
    stages = [e["stage"] for e in events]
    assert {"lowering", "scheduling", "memory", "run"} <= set(stages), stages
    run = next(e["data"] for e in events if e["stage"] == "run")
    assert run["ok"], run
    done = next(e["data"] for e in events if e["stage"] == "done")
    diff = client.get(f"/api/diff/{done['trace_id']}/{log}").get_json()
    assert diff["graph"] == graph["id"] and diff["name"] == graph["name"]
    [group] = [g for g in diff["groups"] if g["b"]]
    assert [b.split(":")[0] for b in group["b"]] == ["cpp_fused_mul_sin_0"] and group["a"]
    assert {"sin", "mul"} <= set(group["nodes"]) and group["how"] == "same FX nodes"
    # Not a rebuild of that log: refused; a graph that is not there: 404.
    assert client.get(f"/api/diff/{log}/{log}").status_code == 400
    assert client.get(f"/api/traces/{log}/graphs/99/rebuild").status_code == 404
