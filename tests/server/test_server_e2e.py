"""End to end through the real compiler CLI: the add+relu sample on the CPU (C++ backend),
streamed as SSE and as NDJSON, stored, and read back after a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from server_support import (
    ISOLATION,
    REAL_BACK,
    REAL_WORKER,
    REPO,
    add_relu_code,
    needs_real_cli,
    stage_names,
    state,
    stream,
    submit,
)

from kernelscope.compiler.events.stage import STAGES as STAGES_IN_ORDER
from kernelscope.server import create_app

pytestmark = needs_real_cli

# add+relu is one graph: the front streams it (`capture_graph`) ahead of `capture`.
STAGES = [STAGES_IN_ORDER[0], "capture_graph", *STAGES_IN_ORDER[1:], "done"]


def config(root: Path) -> dict[str, Any]:
    return {
        "DATABASE": str(root / "traces.sqlite3"),
        "WORKER_CMD": REAL_WORKER,
        "BACK_CMD": REAL_BACK,
        "JOB_TIMEOUT_S": 240,
        "WORKER_THREADS": 2,
        "ISOLATION": ISOLATION,
        # These read the halves' own events; whether the first job finds a warm worker is
        # a race, and the server's early `source` for a cold one has its own test below.
        "EARLY_SOURCE": False,
    }


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def app(root: Path) -> Iterator[Flask]:
    app = create_app(config(root))
    yield app
    state(app).jobs.shutdown()


@pytest.fixture(scope="module")
def compiled(app: Flask) -> tuple[str, list[dict[str, Any]]]:
    """One real compile of the add+relu sample, read over SSE."""
    client = app.test_client()
    job_id = submit(client, add_relu_code(), device="cpu", backend="cpp")
    return job_id, stream(client, job_id)


def test_sse_stream_of_a_real_compile(compiled: tuple[str, list[dict[str, Any]]]) -> None:
    _, events = compiled
    errors = [e["data"] for e in events if e["stage"] == "error"]
    assert not errors, errors
    assert stage_names(events) == STAGES
    assert [e["seq"] for e in events] == list(range(len(events)))
    events = [e for e in events if e["stage"] != "progress"]  # a long stage's heartbeats
    assert all(e["schema"] == 1 for e in events)
    source = events[0]["data"]
    assert source["device"] == "cpu" and source["backend"] == "cpp"
    codegen = next(e for e in events if e["stage"] == "codegen")
    kernels = [k for g in codegen["data"]["graphs"] for k in g["kernels"]]
    assert kernels and all(k["language"] == "cpp" for k in kernels)
    done = events[-1]["data"]
    assert done["ok"] is True and len(done["trace_id"]) == 12


def test_ndjson_replays_the_same_events(
    app: Flask, compiled: tuple[str, list[dict[str, Any]]]
) -> None:
    job_id, events = compiled
    assert stream(app.test_client(), job_id, fmt="ndjson") == events


def test_trace_survives_restart_and_has_a_page(
    app: Flask, root: Path, compiled: tuple[str, list[dict[str, Any]]]
) -> None:
    _, events = compiled
    ident = events[-1]["data"]["trace_id"]
    state(app).jobs.shutdown()
    restarted = create_app(config(root))
    try:
        client = restarted.test_client()
        trace = client.get(f"/api/traces/{ident}").get_json()
        assert trace["events"] == events and trace["code"] == add_relu_code()
        assert trace["options"]["backend"] == "cpp"
        if (REPO / "webui" / "index.html").exists():
            page = client.get(f"/t/{ident}")
            assert page.status_code == 200 and page.mimetype == "text/html"
    finally:
        state(restarted).jobs.shutdown()


def test_a_graph_break_streams_source_then_each_graph_then_capture(app: Flask) -> None:
    """Through the real server: `source` comes first and alone (the front's, streamed before
    Dynamo's first graph), then one `capture_graph` per graph, each as the snippet's, then
    the back half's `capture` listing the same graphs, then our stages."""
    code = (REPO / "samples" / "graph_break.py").read_text()
    client = app.test_client()
    events = stream(client, submit(client, code, device="cpu", backend="cpp"))
    assert [e["seq"] for e in events] == list(range(len(events)))
    events = [e for e in events if e["stage"] != "progress"]  # a long stage's heartbeats
    stages = [e["stage"] for e in events]
    assert stages == ["source", "capture_graph", *STAGES[1:]], stages
    parts, capture = events[1:3], events[3]
    assert [e["origin"] for e in events[:4]] == ["snippet"] * 4
    assert [p["data"]["id"] for p in parts] == [0, 1]
    assert [(g["id"], g["name"], [n["name"] for n in g["nodes"]])
            for g in capture["data"]["graphs"]] == [
        (p["data"]["id"], p["data"]["name"], [n["name"] for n in p["data"]["nodes"]])
        for p in parts]
    assert events[0]["data"]["code"] == code and events[-1]["data"]["ok"] is True
    # A graph's `ms` is time within capture: the stage sum counts capture once.
    stages_ms = sum(e["ms"] for e in events if e["stage"] != "capture_graph")
    assert abs(events[-1]["data"]["stages_ms"] - stages_ms) < 0.2


def test_a_cold_worker_is_preceded_by_the_servers_source(root: Path) -> None:
    """`--pool 0`: every job starts a worker that imports torch before its first event;
    the server's own `source` (the snippet text, the same lines) is the job's first event,
    published before that worker started, and the front's own `source` (the entry and
    inputs only running the snippet tells) follows it."""
    app = create_app({**config(root / "cold"), "WARM_POOL": 0, "EARLY_SOURCE": True})
    try:
        client = app.test_client()
        events = stream(client, submit(client, add_relu_code(), device="cpu", backend="cpp"))
    finally:
        state(app).jobs.shutdown()
    assert stage_names(events) == ["source", *STAGES], stage_names(events)
    events = [e for e in events if e["stage"] != "progress"]
    early, own = events[0], events[1]
    assert early["origin"] == "server" and own["origin"] == "snippet"
    assert early["data"]["code"] == own["data"]["code"] == add_relu_code()
    assert early["data"]["backend"] == own["data"]["backend"] == "cpp"
    assert early["data"]["inputs"] == [] and early["data"]["entry"] == ""
    assert own["data"]["entry"] == "model"  # what running the sample found
    assert [i["shape"] for i in own["data"]["inputs"]] == [[64, 1024], [64, 1024]]
    assert events[-1]["data"]["ok"] is True


def _zoo() -> dict[str, tuple[str, list[str]]]:
    """tests/core/model_zoo.py's tiny Hugging Face models (code, module paths)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("model_zoo", REPO / "tests/core/model_zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {k: v for k, v in module.ZOO.items() if k.startswith("hf_")}


MODELS = {"transformer_4block": ((REPO / "samples" / "transformer_4block.py").read_text(),
                                 [f"blocks.{i}.{p}" for i in range(4) for p in ("attn", "mlp")]),
          **_zoo()}


@pytest.mark.parametrize("name", list(MODELS))
def test_models_compile_through_the_server_with_module_paths(app: Flask, name: str) -> None:
    """The explorer's own path (the sandboxed front half, the payloads the server conforms,
    the back half): the 4-block transformer sample and the tiny Hugging Face models compile,
    match eager, and their nodes and kernels name their modules, repeated blocks apart."""
    code, paths = MODELS[name]
    client = app.test_client()
    events = stream(client, submit(client, code, device="cpu", backend="cpp"))
    by_stage = {e["stage"]: e["data"] for e in events}
    assert "error" not in by_stage, by_stage.get("error")
    assert by_stage["run"]["ok"] and events[-1]["data"]["ok"] is True
    graph = by_stage["capture"]["graphs"][0]
    nodes = {n["module"] for n in graph["nodes"] if n["module"]}
    kernels = {m for k in by_stage["scheduling"]["graphs"][0]["kernels"] for m in k["modules"]}
    for path in paths:
        inside = lambda m: m == path or m.startswith(path + ".")  # noqa: E731
        assert any(inside(m) for m in nodes), (path, sorted(nodes))
        assert any(inside(m) for m in kernels), (path, sorted(kernels))
