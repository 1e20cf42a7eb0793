"""A stand-in for server/ that the web UI's browser tests run against.

It serves webui/ exactly where the real server does and answers the same API from fixture
traces, so the UI can be tested without the compiler: the hand-written
fixtures/softmax_block.json for any snippet, and the traces the compiler recorded
(fixtures/record_fixtures.py: training, recompiles, add_relu, add_relu_nofusion, modules) for
their own snippets, and GET /api/diff from the server's matcher (compiler/compare), and a
TORCH_TRACE log's graph as a snippet from compiler/trace/rebuild.py; those
are also stored traces under their names (`/t/training`), and
`/t/inductor_lost` is add_relu with an Inductor follow-up that never came. A snippet
that does not parse streams a `syntax` error; one containing `raise` streams its `source`
stage and then an `exception` error in capture, as the compiler would; one containing
`time.sleep` runs until it is cancelled (POST /api/jobs/<id>/cancel). The option list is
the real server's (server/web/options.py). With the `inductor` option, a recorded trace's
Inductor comparison is its own `inductor` event, a follow-up as the real server makes it
(server/jobs/followups.py): the stream ends at `done`, which lists it, and the event is then
appended to the stored trace (GET /api/traces/<id>/follow-ups). Each captured graph
streams as a `capture_graph` event ahead of `capture`, as the compiler's front half sends
them. After POST /stub/queued/on a job's first event is `waiting` (a job queued behind
busy slots, as the real server says it); after POST /stub/progress/on a `progress` event
comes before `lowering` (what a long stage is doing). After POST /stub/hold/<stage> a job's
first event of that stage waits for POST /stub/release (so a test sees the state before it without
timing anything).

    python tests/browser/stub_server.py   # http://127.0.0.1:8766
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flask import Flask, Response, abort, jsonify, request, send_from_directory
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer

from kernelscope.compiler.compare.traces import diff_json
from kernelscope.compiler.events.schema import json_schema
from kernelscope.compiler.events.stage import FOLLOW_UPS, PARTS, SCHEMA_VERSION, STAGES, TERMINAL
from kernelscope.compiler.trace.rebuild import logged_graph, snippet, why_not
from kernelscope.server.jobs.early import early_source
from kernelscope.server.jobs.followups import states as follow_up_states
from kernelscope.server.jobs.manager import JobRequest
from kernelscope.server.web.options import parse_options

ROOT = Path(__file__).resolve().parents[2]
WEBUI = ROOT / "webui"
FIXTURE = Path(__file__).with_name("fixtures") / "softmax_block.json"

BROKEN = "import torch\n\n\ndef f(x):\n    return x +\n"
RAISES = (
    "import torch\n\n\ndef f(x):\n    y = x.sin()\n"
    '    raise RuntimeError("shape mismatch: [64] vs [32]")\n    return y\n\n\n'
    "x = torch.randn(64)\n"
)


RECORDED = ("training", "recompiles", "add_relu", "add_relu_nofusion", "h200_softmax",
            "modules", "cpu_triton_softmax", "profile_block")
# Stored traces served only under their name: h200_server_softmax is what the real server
# stored on the H200 host (scripts/latency.py --device cuda --backend triton --save-trace).
# inductor_block: samples/transformer_block.py with Inductor's kernels matched to ours.
# torch_trace: a stock-Inductor TORCH_TRACE log as `kernelscope open` stores it.
STORED = (*RECORDED, "h200_server_softmax", "inductor_block", "torch_trace")
# The model traces (fixtures/record_fixtures.py, gzipped): stored traces too, read when
# first asked for (the GPT-2 step is 14 MB of JSON).
MODELS = ("llama6_train", "gpt2_train")
PROGRESS = {"stage": "lowering", "doing": "graph 0", "done": 0, "total": 1,
            "stage_s": 0.5, "message": "lowering: graph 0 [0/1] (0.5 s)"}
SLEEPY = "import time\n\n\ndef f(x):\n    return x\n\n\ntime.sleep(60)\n"


def load_fixture(name: str | None = None) -> dict[str, Any]:
    path = FIXTURE if name is None else FIXTURE.with_name(f"{name}.json")
    if not path.exists() and name is not None:
        packed = FIXTURE.with_name(f"{name}.json.gz")
        trace: dict[str, Any] = json.loads(gzip.decompress(packed.read_bytes()))
        return trace
    return json.loads(path.read_text())


def recorded_events(code: str, options: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The recorded trace for this snippet (fusion off picks add_relu_nofusion), no `done`."""
    for name in RECORDED:
        trace = load_fixture(name)
        if trace["code"] != code:
            continue
        if name == "add_relu" and options.get("fusion") is False:
            trace = load_fixture("add_relu_nofusion")
        events = [e for e in trace["events"] if e["stage"] != "done"]
        return inductor_after_profile(events, bool(options.get("inductor")))
    return None


def inductor_after_profile(events: list[dict[str, Any]], asked: bool) -> list[dict[str, Any]]:
    """A recorded trace as the compiler streams it now: `profile` without Inductor, then
    (when asked) Inductor's code in an `inductor` event, each kernel with a made-up time
    (fixtures recorded before the event existed have none)."""
    out = []
    for e in events:
        out.append(e)
        if e["stage"] == "source":
            e["data"].setdefault("options", {})["inductor"] = asked
        if e["stage"] != "profile":
            continue
        old, ms = e["data"].pop("inductor", None), e["data"].pop("inductor_ms", None)
        e["data"]["inductor_ms"] = None
        if asked and old is not None:
            kernels = [{**k, "ms": k.get("ms", 0.0123)} for k in old["kernels"]]
            data = {**old, "kernels": kernels, "measured": True, "reason": None,
                    "device": e["data"].get("device", "cpu"), "inductor_ms": ms or 0.0456}
            out.append(event(e["seq"] + 1, "inductor", data, 1234.0))
    for i, e in enumerate(out):
        e["seq"] = i
    return out


def event(seq: int, stage: str, data: dict[str, Any], ms: float = 0) -> dict[str, Any]:
    return {"schema": 1, "seq": seq, "stage": stage, "ms": ms, "data": data}


def events_for(code: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """What the compiler would stream for `code`: the fixture, or an error."""
    fixture = load_fixture()["events"]
    recorded = recorded_events(code, options)
    if recorded is not None:
        return recorded
    try:
        compile(code, "snippet.py", "exec")
    except SyntaxError as e:
        return [
            event(
                0,
                "error",
                {
                    "stage": "source",
                    "kind": "syntax",
                    "message": f"SyntaxError: {e.msg}",
                    "line": e.lineno,
                    "traceback": f'  File "snippet.py", line {e.lineno}\n',
                },
            )
        ]
    if "raise" in code:
        line = next(i for i, t in enumerate(code.splitlines(), 1) if "raise" in t)
        head = copy.deepcopy(fixture[:1])
        head[0]["data"]["code"] = code
        return head + [
            event(
                1,
                "error",
                {
                    "stage": "capture",
                    "kind": "exception",
                    "line": line,
                    "message": "RuntimeError: shape mismatch: [64] vs [32]",
                    "traceback": f'Traceback (most recent call last):\n  File "snippet.py", line '
                    f"{line}, in f\nRuntimeError: shape mismatch: [64] vs [32]\n",
                },
            )
        ]
    evs = copy.deepcopy(fixture[:-1])
    evs[0]["data"]["code"] = code
    if "graph_break()" in code:  # the capture stage's report of a graph break
        line = next(i for i, t in enumerate(code.splitlines(), 1) if "graph_break()" in t)
        evs[1]["data"]["graph_breaks"] = [
            {"reason": "call to torch._dynamo.graph_break()", "line": line}
        ]
    if "print(" in code:  # what the compiler reports when the snippet prints
        evs[0]["data"]["stdout"] = "hello from the snippet\n"
        evs[1]["data"]["stdout"] = "traced once\n"
    if options.get("device") == "cuda":
        # What a GPU build report adds to each kernel (the shape the UI reads; made up
        # here, as no GPU runs these tests).
        for g in evs[6]["data"]["graphs"]:
            for k in g["kernels"]:
                k.update(registers=32, spills=0, shared_bytes=0, num_warps=4, num_stages=3)
                k["ir"] = {
                    "ttir": f"module {{\n  tt.func public @{k['name']}() {{\n  }}\n}}\n",
                    "ptx": f".visible .entry {k['name']}(\n)\n{{\n\tret;\n}}\n",
                }
    if options.get("backend") == "triton":
        evs[-1]["data"] = {
            "measured": False,
            "device": "cpu",
            "peak_gbps": None,
            "reason": "Triton ran under the interpreter (TRITON_INTERPRET=1); "
            "timings would mean nothing",
            "eager_ms": None,
            "kernelscope_ms": None,
            "inductor_ms": None,
            "kernels": [],
        }
    return evs


def with_parts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each captured graph also as its own `capture_graph` event just before `capture`
    (recorded fixtures predate that event), numbered anew."""
    if any(e["stage"] in PARTS for e in events):
        return events
    out: list[dict[str, Any]] = []
    for e in events:
        if e["stage"] == "capture":
            out += [event(0, "capture_graph", copy.deepcopy(g), e["ms"])
                    for g in e["data"].get("graphs", [])]
        out.append(e)
    for i, e in enumerate(out):
        e["seq"] = i
    return out


def create_stub_app(delay: float = 0.03, highlight_fails: bool = False) -> Flask:
    app = Flask(__name__, static_folder=None)
    jobs: dict[str, dict[str, Any]] = {}
    traces: dict[str, dict[str, Any]] = {}
    gate: dict[str, Any] = {"stage": None, "open": threading.Event(), "cold": False}
    def store(name: str) -> None:
        stored = load_fixture(name)
        stored["id"] = name
        stored["created"] = "2026-12-01T08:00:00Z"
        stored["events"][-1]["data"]["trace_id"] = name
        traces[name] = stored

    for name in STORED:
        store(name)
    # A trace whose Inductor follow-up never came (its server stopped mid-way).
    lost = load_fixture("add_relu")
    lost["events"] = inductor_after_profile([e for e in lost["events"] if e["stage"] != "done"],
                                            True)
    lost["events"] = [e for e in lost["events"] if e["stage"] not in FOLLOW_UPS]
    lost["events"].append(event(len(lost["events"]), "done", {
        "ok": True, "trace_id": "inductor_lost", "follow_ups": ["inductor"],
        "follow_ups_until": 1000.0}))
    traces["inductor_lost"] = {**lost, "id": "inductor_lost", "created": "2026-12-01T08:00:00Z"}
    ids = itertools.count(1)

    @app.get("/")
    @app.get("/t/<trace_id>")
    @app.get("/diff/<a>/<b>")
    def index(trace_id: str | None = None, a: str | None = None, b: str | None = None) -> Response:
        response = send_from_directory(WEBUI, "index.html")
        if trace_id is not None and trace_id not in traces and trace_id not in MODELS:
            response.status_code = 404  # the page shows its own not-found view
        return response

    @app.get("/<path:unknown>")
    def not_found(unknown: str) -> Response:
        if unknown.startswith("api/"):
            abort(404)
        response = send_from_directory(WEBUI, "index.html")
        response.status_code = 404
        return response

    @app.get("/api/options")
    def options() -> Response:
        from kernelscope.server.web.options import option_fields

        return jsonify({"options": option_fields()})

    @app.post("/api/jobs/<job_id>/cancel")
    def cancel(job_id: str) -> Response:
        job = jobs.get(job_id) or abort(404)
        job["cancelled"] = True
        return jsonify({"cancelled": True})

    @app.get("/webui/<path:path>")
    def webui(path: str) -> Response:
        return send_from_directory(WEBUI, path)

    @app.get("/api/health")
    def health() -> Response:
        return jsonify(
            {
                "ok": True,
                "stub": True,
                "isolation": "none (stub)",
                "devices": {"cuda": True, "gpu": "stub GPU"},
            }
        )

    @app.get("/api/schema")
    def schema() -> Response:
        return jsonify(
            {
                "version": SCHEMA_VERSION,
                "stages": list(STAGES),
                "parts": list(PARTS),
                "follow_ups": list(FOLLOW_UPS),
                "terminal": list(TERMINAL),
                "schema": json_schema(),
            }
        )

    @app.get("/api/samples")
    def samples() -> Response:
        fixture = load_fixture()
        return jsonify(
            {
                "samples": [
                    {
                        "name": "softmax_block",
                        "title": "GEMM + GELU + softmax",
                        "code": fixture["code"],
                    },
                    {"name": "syntax_error", "title": "A syntax error", "code": BROKEN},
                    {"name": "raises", "title": "A snippet that raises", "code": RAISES},
                    {"name": "sleepy", "title": "A snippet that never ends", "code": SLEEPY},
                ]
                + [
                    {"name": name, "title": f"recorded: {name}", "code": load_fixture(name)["code"]}
                    for name in ("training", "recompiles", "add_relu")
                ]
            }
        )

    @app.post("/api/compile")
    def compile_job() -> tuple[Response, int]:
        body = request.get_json(force=True)
        job_id = f"job{next(ids)}"
        jobs[job_id] = {"code": body.get("code", ""), "options": body.get("options", {})}
        return jsonify({"job_id": job_id, "events": f"/api/jobs/{job_id}/events"}), 202

    @app.get("/api/jobs/<job_id>/events")
    def job_events(job_id: str) -> Response:
        job = jobs.get(job_id) or abort(404)
        return Response(stream(job), mimetype="text/event-stream")

    def stream(job: dict[str, Any]) -> Iterator[str]:
        if "time.sleep" in job["code"]:
            yield from sleepy(job)
            return
        evs = with_parts(events_for(job["code"], job["options"]))
        later = [e for e in evs if e["stage"] in FOLLOW_UPS]
        evs = [e for e in evs if e["stage"] not in FOLLOW_UPS]
        if gate.get("queued"):  # as the real server for a job behind busy slots
            waiting = {**event(0, "waiting", {"on": "slot", "busy": 2, "position": 1,
                                              "waited_s": 0.0, "message":
                                              "waiting for a worker: 2 busy, you are 1st"}),
                       "origin": "server"}
            evs = [waiting, *evs]
            for i, e in enumerate(evs):
                e["seq"] = i
        if gate.get("progress"):  # a long lowering says what it does before its event
            at = next(i for i, e in enumerate(evs) if e["stage"] == "lowering")
            evs.insert(at, {**event(0, "progress", PROGRESS), "origin": "compiler"})
            for i, e in enumerate(evs):
                e["seq"] = i
        cold = gate["cold"]
        if cold:  # as the real server for a cold worker: its own `source` first
            request = JobRequest(job["code"], parse_options(job["options"]))
            early = {**event(0, "source", early_source(request)), "origin": "server"}
            evs = [early, *evs]
            for i, e in enumerate(evs):
                e["seq"] = i
            yield f"data: {json.dumps(early)}\n\n"
        for ev in evs[1:] if cold else evs:
            while ev["stage"] == gate["stage"] and not gate["open"].wait(0.1):
                yield ": heartbeat\n\n"
            time.sleep(delay)
            yield ": heartbeat\n\n"
            yield f"data: {json.dumps(ev)}\n\n"
        ok = evs[-1]["stage"] != "error"
        body = json.dumps(evs, sort_keys=True).encode()
        trace_id = hashlib.sha256(body).hexdigest()[:12]
        done = event(len(evs), "done", {"ok": ok, "trace_id": trace_id})
        if later:  # as the real server: `done` lists them, the trace gets them after it
            done["data"].update(follow_ups=[e["stage"] for e in later],
                                follow_ups_until=time.time() + 600)
        traces[trace_id] = {
            "id": trace_id,
            "created": "2025-11-29T10:00:00Z",
            "code": job["code"],
            "options": job["options"],
            "events": evs + [done],
        }
        yield f"data: {json.dumps(done)}\n\n"
        if later:
            threading.Thread(target=follow_up, args=(traces[trace_id], later), daemon=True).start()

    def follow_up(trace: dict[str, Any], later: list[dict[str, Any]]) -> None:
        """Inductor after `done`: appended to the stored trace (held like any stage)."""
        for ev in later:
            while ev["stage"] == gate["stage"] and not gate["open"].wait(0.1):
                pass
            time.sleep(delay)
            trace["events"].append({**ev, "seq": len(trace["events"]), "origin": "compiler"})

    def sleepy(job: dict[str, Any]) -> Iterator[str]:
        first = copy.deepcopy(load_fixture()["events"][0])
        first["data"]["code"] = job["code"]
        yield f"data: {json.dumps(first)}\n\n"
        deadline = time.monotonic() + 30
        while not job.get("cancelled") and time.monotonic() < deadline:
            time.sleep(0.05)
            yield ": heartbeat\n\n"
        err = event(
            1,
            "error",
            {
                "stage": "capture",
                "kind": "killed",
                "line": None,
                "message": "cancelled: the worker was killed",
            },
        )
        yield f"data: {json.dumps(err)}\n\n"
        yield f"data: {json.dumps(event(2, 'done', {'ok': False, 'cancelled': True}))}\n\n"

    @app.post("/stub/hold/<stage>")
    def hold(stage: str) -> Response:
        """Later jobs' events of `stage` wait until /stub/release."""
        gate["open"].clear()
        gate["stage"] = stage
        return jsonify({"hold": stage})

    @app.post("/stub/cold/<flag>")
    def cold(flag: str) -> Response:
        """Later jobs start "cold": the server's early `source` comes first (on/off)."""
        gate["cold"] = flag == "on"
        return jsonify({"cold": gate["cold"]})

    @app.post("/stub/progress/<flag>")
    def progress(flag: str) -> Response:
        """Later jobs say what lowering does (a `progress` event) before it ends (on/off)."""
        gate["progress"] = flag == "on"
        return jsonify({"progress": gate["progress"]})

    @app.post("/stub/queued/<flag>")
    def queued(flag: str) -> Response:
        """Later jobs start queued: a `waiting` event comes first (on/off)."""
        gate["queued"] = flag == "on"
        return jsonify({"queued": gate["queued"]})

    @app.post("/stub/release")
    def release() -> Response:
        gate["open"].set()
        gate["stage"] = None
        return jsonify({"hold": None})

    @app.get("/api/traces/<trace_id>")
    def trace(trace_id: str) -> Response:
        if trace_id in MODELS and trace_id not in traces:
            store(trace_id)
        found = traces.get(trace_id) or abort(404)
        return jsonify({**found, "follow_ups": follow_up_states(found)})

    @app.get("/api/diff/<a>/<b>")
    def trace_diff(a: str, b: str) -> Response:
        left = traces.get(a) or abort(404)
        right = None if b == "inductor" else traces.get(b) or abort(404)
        return jsonify({"groups": diff_json(left["events"],
                                            right["events"] if right else None)})

    @app.get("/api/traces/<trace_id>/graphs/<int:graph>/rebuild")
    def trace_graph_rebuild(trace_id: str, graph: int) -> Response:
        found = traces.get(trace_id) or abort(404)
        logged = logged_graph(found["events"], graph) or abort(404)
        if why_not(logged) is not None:
            return jsonify({"error": why_not(logged)}), 422  # type: ignore[return-value]
        return jsonify({"code": snippet(logged, trace_id), "graph": graph,
                        "name": logged.get("name", "")})

    @app.get("/api/traces/<trace_id>/follow-ups")
    def trace_follow_ups(trace_id: str) -> Response:
        found = traces.get(trace_id) or abort(404)
        at = next(i for i, e in enumerate(found["events"]) if e["stage"] == "done")
        return jsonify({"follow_ups": follow_up_states(found),
                        "events": found["events"][at + 1:]})

    @app.post("/api/highlight")
    def highlight_code() -> Response:
        if highlight_fails:
            abort(500)
        body = request.get_json(force=True)
        lexer = CppLexer() if body.get("language") == "cpp" else PythonLexer()
        html = highlight(body.get("code", ""), lexer, HtmlFormatter(linespans="L"))
        return jsonify({"html": html})

    @app.get("/api/highlight.css")
    def highlight_css() -> Response:
        return Response(HtmlFormatter().get_style_defs(".highlight"), mimetype="text/css")

    return app


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(ROOT))  # this checkout's server/, not an installed one
    create_stub_app(delay=0.3).run(host="127.0.0.1", port=8766, threaded=True)
