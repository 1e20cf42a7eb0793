"""The pages blueprint: the web UI's files, and the frozen-trace permalink `/t/<id>`.

`/` and `/t/<id>` both answer webui/index.html; the page tells them apart by
`window.location.pathname` and, on `/t/<id>`, reads the stored trace from
`/api/traces/<id>` instead of compiling. Every other file of webui/ is served under
`/webui/<path>`, so index.html refers to its scripts and styles as `/webui/...`.
"""

from __future__ import annotations

from flask import Blueprint, Response, send_from_directory

from server.errors import ApiError
from server.headers import page_html
from server.state import app_state

bp = Blueprint("pages", __name__)


def _index() -> Response:
    state = app_state()
    index = state.webui_dir / "index.html"
    if not index.is_file():
        raise ApiError(f"the web UI is missing: no index.html in {state.webui_dir}", 404)
    # Every answer carries its own CSP nonce (server/headers.py), so the page is rendered
    # per request and never cached.
    page = page_html(index.read_text(encoding="utf-8"), state.cdn)
    return Response(page, mimetype="text/html", headers={"Cache-Control": "no-store"})


@bp.get("/")
def index() -> Response:
    return _index()


@bp.get("/t/<trace_id>")
def permalink(trace_id: str) -> Response:
    if not app_state().store.exists(trace_id):
        raise ApiError(f"no trace {trace_id!r}", 404)
    return _index()


@bp.get("/webui/<path:filename>")
def webui_file(filename: str) -> Response:
    # send_from_directory refuses paths that leave the folder (404).
    return send_from_directory(app_state().webui_dir, filename, max_age=0)
