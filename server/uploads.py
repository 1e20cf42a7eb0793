"""Your own run, opened in the explorer: `POST /api/traces`, and the store glue that
`kernelscope open DIR` shares with it.

In: the files of a trace directory (compiler/trace_dir.py writes them; the web UI's "Open
run" control and `kernelscope open` send them) as `{"files": [{"name", "text"}]}`. Out: a
stored trace with a permalink, `201 {"id", "url", "graphs", "notices"}`.

The files are someone else's data. compiler/trace_open.py refuses what is outside the
format (unknown format or schema version, events the schema does not allow, too deep, not
JSON), naming the file; the `source` and `capture` payloads (the user's code and what
Dynamo made of it) are then conformed to their event types as a job's are
(server/trust.py), and every event says it came from the recording process (`origin:
snippet`, `done.isolated` false). Bodies over `UPLOAD_LIMIT_MB` answer 413 before they
are read. Nothing stored before is touched: the store only ever inserts.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from kernelscope.compiler.trace_open import MAX_FILES, Opened, TraceRefused, open_files
from kernelscope.server.errors import ApiError
from kernelscope.server.inputs import BadInput, parse_request
from kernelscope.server.rows import Store
from kernelscope.server.state import app_state
from kernelscope.server.trust import SNIPPET_STAGES, conform_data

bp = Blueprint("uploads", __name__, url_prefix="/api")
MAX_NAME = 255


def store_files(store: Store, files: list[tuple[str, bytes]]) -> tuple[str, Opened]:
    """Open the files as one trace and store it; TraceRefused says why not."""
    opened = open_files(files)
    events = []
    for event in opened.events:
        if event["stage"] in SNIPPET_STAGES:
            data = {**conform_data(event["stage"], event["data"]), "origin": "snippet"}
            if event["stage"] == "source":
                data["code"] = opened.code  # capped by trace_open, not by a string cap
            event = {**event, "data": data}
        events.append(event)
    ident = store.put(opened.code, opened.options, events, True)
    return ident, opened


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
    try:
        body = parse_request(request.get_data(cache=False))
    except BadInput as exc:
        raise ApiError(str(exc)) from None
    try:
        ident, opened = store_files(app_state().store, _files(body))
    except TraceRefused as exc:
        raise ApiError(f"cannot open this trace: {exc}") from None
    graphs = len(opened.events[1]["data"]["graphs"])
    return jsonify({"id": ident, "url": f"/t/{ident}", "graphs": graphs,
                    "notices": opened.notices}), 201
