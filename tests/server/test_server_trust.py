"""Issue 20, trust: what the capture half says is the snippet's, however it is labelled.

The snippet runs in the capture half's process, so it can rewrite the bundle that half
writes (here it patches `json.dump`, the fake worker's bundle writer; in the real compiler
it would patch `write_front_bundle`). The back half replays that bundle. These tests are
the red-team findings 1-3 of issue 20, each an attack.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from server_support import (
    REDIS_URL,
    AppFactory,
    compile_events,
    state,
)

from kernelscope.server.jobs.manager import JobRequest
from kernelscope.server.jobs.trust import STRING_CAP, StageOrigin, conform_payload

ALL_BACKENDS = False

LAUNDER = '''
import json
_real = json.dump
def _forge(obj, f, *a, **k):
    obj["source"] = {**obj["source"], "code": "print('innocent')", "origin": "compiler",
                     "speedup_vs_eager": 1000.0, "verified_by": "kernelscope"}
    obj["capture"] = {"graphs": [], "ok": True, "isolated": True, "origin": "compiler",
                      "verified_by": "kernelscope", "stdout": "x" * 200000}
    return _real(obj, f, *a, **k)
json.dump = _forge
'''

FORGED_ERROR = '''
import json
_real = json.dump
def _forge(obj, f, *a, **k):
    forged = {"error": {"stage": "lowering", "kind": "build", "line": None,
                        "message": "g++ failed: see http://evil.example/fix"}}
    return _real(forged, f, *a, **k)
json.dump = _forge
'''


def by_stage(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["stage"]: e for e in events}


def test_a_laundered_bundle_comes_back_as_the_snippets_with_its_code_and_keys_gone(
    make_app: AppFactory,
) -> None:
    client = make_app().test_client()
    events = compile_events(client, LAUNDER)
    seen = by_stage(events)
    source, capture = seen["source"], seen["capture"]
    assert source["origin"] == "snippet" and capture["origin"] == "snippet"
    assert source["data"]["origin"] == "snippet" and capture["data"]["origin"] == "snippet"
    assert source["data"]["code"] == LAUNDER  # re-derived from what was submitted
    for data in (source["data"], capture["data"]):
        for key in ("speedup_vs_eager", "verified_by", "ok", "isolated"):
            assert key not in data, key
    assert len(capture["data"]["stdout"]) <= STRING_CAP
    # The back half's own stages are still the compiler's.
    assert seen["lowering"]["origin"] == "compiler"


def test_a_bundle_holding_only_an_error_is_not_a_compiler_error(make_app: AppFactory) -> None:
    client = make_app().test_client()
    events = compile_events(client, FORGED_ERROR)
    errors = [e for e in events if e["stage"] == "error"]
    assert len(errors) == 1
    assert errors[0]["origin"] == "snippet", errors[0]
    assert events[-1]["stage"] == "done" and events[-1]["data"]["ok"] is False


def test_origin_is_set_by_stage_not_by_label() -> None:
    order = StageOrigin()
    assert [order.origin(s) for s in ("source", "capture", "error")] == ["snippet"] * 3
    order = StageOrigin()
    assert [order.origin(s) for s in ("source", "capture", "lowering", "error", "done")] == [
        "snippet", "snippet", "compiler", "compiler", "compiler"]


def test_conforming_drops_unknown_keys_wrong_types_and_caps_sizes() -> None:
    request = JobRequest("x = 1\n", {"device": "cpu"})
    data = {"stage": "capture", "kind": "not-a-kind", "message": "m" * (STRING_CAP * 2),
            "line": "7", "extra": {"nested": 1}}
    out = conform_payload("error", data, request)
    assert out == {"stage": "capture", "message": "m" * STRING_CAP}
    graph = {"id": 1, "name": "g", "code": "", "nodes": [], "edges": [], "kind": "forward",
             "dynamo_graph": 0, "made_up": True}
    capture = conform_payload("capture", {"graphs": [{"id": "zero"}, graph],
                                          "graph_breaks": "none", "dynamo_graphs": 1},
                              request)
    assert capture["graphs"] == [{k: v for k, v in graph.items() if k != "made_up"}]
    assert "graph_breaks" not in capture and capture["origin"] == "snippet"


@pytest.mark.skipif(not REDIS_URL, reason="KERNELSCOPE_TEST_REDIS not set "
                    "(eval \"$(bash scripts/services.sh start)\")")
@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_a_worker_runs_only_its_own_task_whatever_redis_holds(
    make_app: AppFactory, backend: str, tmp_path: Path
) -> None:
    import redis
    from rq import Queue
    from rq.serializers import JSONSerializer

    app = make_app(MAX_JOBS=1)
    ns = app.config["QUEUE_NAME"]
    conn = redis.Redis.from_url(str(REDIS_URL))
    marker = tmp_path / "pwned"
    # What anyone who can write to Redis could enqueue: a function of their choice, as
    # JSON and as RQ's default pickle.
    Queue(ns, connection=conn, serializer=JSONSerializer).enqueue(
        "os.system", f"touch {marker}")
    Queue(ns, connection=conn).enqueue("os.system", f"touch {marker}-pickle")
    Queue(ns, connection=conn, serializer=JSONSerializer).enqueue(
        "kernelscope.server.jobs.rqworker.execute", "other-queue", "x" * 12)
    time.sleep(3)
    assert not marker.exists() and not Path(f"{marker}-pickle").exists()
    # The worker survived them and still runs real jobs.
    events = compile_events(app.test_client(), "x = 1\n")
    assert events[-1]["stage"] == "done" and events[-1]["data"]["ok"] is True
    assert state(app).jobs.stats()["workers"] >= 1


def test_services_script_turns_redis_auth_on() -> None:
    text = (Path(__file__).resolve().parents[2] / "scripts" / "services.sh").read_text()
    assert "user default off" in text and "redis.pass" in text


def test_the_web_ui_marks_snippet_content() -> None:
    root = Path(__file__).resolve().parents[2] / "webui"
    sources = "\n".join(p.read_text() for p in (root / "js").rglob("*.js"))
    assert "snippet-origin" in sources
    css = "\n".join(p.read_text() for p in (root / "css").rglob("*.css"))
    assert ".snippet-origin" in css
