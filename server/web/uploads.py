"""Your own run, opened in the explorer: `POST /api/traces`, and the store glue that
`kernelscope open DIR` shares with it.

In: the files of a trace directory (compiler/trace/writer.py writes them; the web UI's "Open
run" control and `kernelscope open` send them) as `{"files": [{"name", "text"}]}`. Out: a
stored trace with a permalink, `201 {"id", "url", "graphs", "notices"}`.

The files are someone else's data. compiler/trace/reader.py refuses what is outside the
format (unknown format or schema version, events the schema does not allow, too deep, not
JSON), naming the file; the `source` and `capture` payloads (the user's code and what
Dynamo made of it) are then conformed to their event types as a job's are
(server/jobs/trust.py), and every event says it came from the recording process (`origin:
snippet`, `done.isolated` false). Bodies over `UPLOAD_LIMIT_MB` answer 413 before they
are read. Checking takes about a second of CPU per MiB, so the server does it in a child
process (`python -m kernelscope.server.web.upload_child`) with a wall clock, CPU and memory
limit, `UPLOAD_SLOTS` at a time (503 beyond): the web tier, whose streams share one
process, only waits. Nothing stored before is touched: the store only ever inserts.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from flask.blueprints import BlueprintSetupState

from kernelscope.compiler.events.read import data_as, envelope
from kernelscope.compiler.events.types import Capture
from kernelscope.compiler.trace.reader import MAX_FILES, Opened, TraceRefused, open_files
from kernelscope.server.jobs.inputs import BadInput, parse_request
from kernelscope.server.jobs.trust import SNIPPET_STAGES, conform_data
from kernelscope.server.state import app_state
from kernelscope.server.store.rows import Store
from kernelscope.server.web.errors import ApiError

bp = Blueprint("uploads", __name__, url_prefix="/api")
MAX_NAME = 255
SLOT = "kernelscope.upload_slots"
OPENER = [sys.executable, "-m", "kernelscope.server.web.upload_child"]


@bp.record_once
def _slots(setup: BlueprintSetupState) -> None:
    setup.app.extensions[SLOT] = threading.BoundedSemaphore(
        int(setup.app.config["UPLOAD_SLOTS"]))


def store_files(store: Store, files: list[tuple[str, bytes]]) -> tuple[str, Opened]:
    """Open the files as one trace (in this process: `kernelscope open`) and store it;
    TraceRefused says why not."""
    opened = conformed(open_files(files))
    return store.put(opened.code, opened.options, opened.events, True), opened


def conformed(opened: Opened) -> Opened:
    """The trace with its `source` and `capture` conformed as a job's are."""
    events = []
    for event in opened.events:
        read = envelope(event)
        if read.stage in SNIPPET_STAGES:
            data = {**conform_data(read.stage, read.data), "origin": "snippet"}
            if read.stage == "source":
                data["code"] = opened.code  # capped by trace_open, not by a string cap
            event = {**event, "data": data}
        events.append(event)
    return Opened(opened.code, opened.options, events, opened.notices)


def _limits(cpu_s: int, memory_mb: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        os.nice(5)

    return apply


def open_in_child(raw: bytes, timeout_s: float, memory_mb: int, repo_dir: str) -> Opened:
    """server/web/upload_child.py on the request body, in a child process (started in the checkout,
    whose kernelscope/ comes first on its path: nothing else can shadow it)."""
    try:
        done = subprocess.run(OPENER, input=raw, capture_output=True, timeout=timeout_s,
                              cwd=repo_dir,
                              preexec_fn=_limits(int(timeout_s) + 1, memory_mb), check=False)
    except subprocess.TimeoutExpired:
        raise ApiError(f"opening the trace took longer than {timeout_s:.0f} s", 413) from None
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        why = "too large to open" if done.returncode else "no answer"
        raise ApiError(f"cannot open this trace: {why} (the opener exited with "
                       f"{done.returncode})", 413 if done.returncode else 500) from None
    if "refused" in answer:
        raise TraceRefused(str(answer["refused"]))
    return Opened(answer["code"], answer["options"], answer["events"], answer["notices"])


def _files(body: Any) -> list[tuple[str, bytes]]:
    files = body.get("files") if isinstance(body, dict) else None
    if not isinstance(files, list) or not files:
        raise ApiError("'files' is required: the trace directory's files, "
                       "[{\"name\": \"...json\", \"text\": \"...\"}]")
    if len(files) > MAX_FILES:
        raise ApiError(f"too many files ({len(files)}; limit {MAX_FILES})")
    out = []
    for i, item in enumerate(files):
        name = item.get("name") if isinstance(item, dict) else None
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name or len(name) > MAX_NAME:
            raise ApiError(f"files[{i}]: 'name' must be the file's name")
        if not isinstance(text, str):
            raise ApiError(f"files[{i}] ({name[:80]}): 'text' must be the file's text")
        out.append((name, text.encode("utf-8")))
    return out


@bp.post("/traces")
def upload() -> tuple[Response, int]:
    # This route's own cap (a recorded model is larger than a compile request); set before
    # the body is read, so an oversized one is refused (413) without reading it.
    request.max_content_length = int(current_app.config["UPLOAD_LIMIT_MB"]) << 20
    if not request.is_json:
        raise ApiError("expected a JSON body (Content-Type: application/json)")
    raw = request.get_data(cache=False)
    try:
        body = parse_request(raw)
    except BadInput as exc:
        raise ApiError(str(exc)) from None
    _files(body)  # the shape, with a clear error, before a process is started for it
    slot = current_app.extensions[SLOT]
    if not slot.acquire(blocking=False):
        raise ApiError("busy opening another trace, try again", 503, retry_after_s=5)
    try:
        opened = open_in_child(raw, float(current_app.config["UPLOAD_TIMEOUT_S"]),
                               int(current_app.config["UPLOAD_MEMORY_MB"]),
                               str(current_app.config["REPO_DIR"]))
        store = app_state().store
        ident = store.put(opened.code, opened.options, opened.events, True)
    except TraceRefused as exc:
        raise ApiError(f"cannot open this trace: {exc}") from None
    finally:
        slot.release()
    capture = data_as(envelope(opened.events[1]), Capture)  # trace_open checked its schema
    graphs = len(capture.graphs) if capture is not None else 0
    return jsonify({"id": ident, "url": f"/t/{ident}", "graphs": graphs,
                    "notices": opened.notices}), 201

