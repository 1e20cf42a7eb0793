"""A stand-in for server/ that the web UI's browser tests run against.

It serves webui/ exactly where the real server does and answers the same API from the
recorded fixture trace (fixtures/softmax_block.json), so the UI can be tested without the
compiler. A snippet that does not parse streams a `syntax` error; one containing `raise`
streams its `source` stage and then an `exception` error in capture, as the compiler would.

    python tests/browser/stub_server.py   # http://127.0.0.1:8766
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from flask import Flask, Response, abort, jsonify, request, send_from_directory
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CppLexer, PythonLexer

from compiler.event_types import json_schema
from compiler.events import SCHEMA_VERSION, STAGES, TERMINAL

ROOT = Path(__file__).resolve().parents[2]
WEBUI = ROOT / "webui"
FIXTURE = Path(__file__).with_name("fixtures") / "softmax_block.json"

BROKEN = "import torch\n\n\ndef f(x):\n    return x +\n"
RAISES = (
    "import torch\n\n\ndef f(x):\n    y = x.sin()\n"
    '    raise RuntimeError("shape mismatch: [64] vs [32]")\n    return y\n\n\n'
    "x = torch.randn(64)\n"
)


def load_fixture() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def event(seq: int, stage: str, data: dict[str, Any], ms: float = 0) -> dict[str, Any]:
    return {"schema": 1, "seq": seq, "stage": stage, "ms": ms, "data": data}


def events_for(code: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """What the compiler would stream for `code`: the fixture, or an error."""
    fixture = load_fixture()["events"]
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


def create_stub_app(delay: float = 0.03, highlight_fails: bool = False) -> Flask:
    app = Flask(__name__, static_folder=None)
    jobs: dict[str, dict[str, Any]] = {}
    traces: dict[str, dict[str, Any]] = {}
    ids = itertools.count(1)

    @app.get("/")
    @app.get("/t/<trace_id>")
    def index(trace_id: str | None = None) -> Response:
        return send_from_directory(WEBUI, "index.html")

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
        return jsonify({"version": SCHEMA_VERSION, "stages": list(STAGES),
                        "terminal": list(TERMINAL), "schema": json_schema()})

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
        evs = events_for(job["code"], job["options"])
        for ev in evs:
            time.sleep(delay)
            yield ": heartbeat\n\n"
            yield f"data: {json.dumps(ev)}\n\n"
        ok = evs[-1]["stage"] != "error"
        body = json.dumps(evs, sort_keys=True).encode()
        trace_id = hashlib.sha256(body).hexdigest()[:12]
        done = event(len(evs), "done", {"ok": ok, "trace_id": trace_id})
        traces[trace_id] = {
            "id": trace_id,
            "created": "2025-11-29T10:00:00Z",
            "code": job["code"],
            "options": job["options"],
            "events": evs + [done],
        }
        yield f"data: {json.dumps(done)}\n\n"

    @app.get("/api/traces/<trace_id>")
    def trace(trace_id: str) -> Response:
        return jsonify(traces.get(trace_id) or abort(404))

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
    create_stub_app(delay=0.3).run(host="127.0.0.1", port=8766, threaded=True)
