"""The pages blueprint: the web UI's files, the frozen-trace permalink `/t/<id>`, the diff
`/diff/<a>/<b>`, and the page's own not-found view for any other path.

`/`, `/t/<id>` and `/diff/<a>/<b>` all answer webui/index.html; the page tells them apart
by `window.location.pathname` and reads the stored traces from `/api/traces/<id>`. A path
that names no page (or a trace that does not exist) answers the same page with status 404,
and the page shows its not-found view, so a mistyped permalink never shows raw JSON. Every
other file of webui/ is served under `/webui/<path>`: gzip-compressed when the client
accepts it, with a strong ETag (a 304 when it matches) and `Cache-Control: no-cache`
(revalidate every time: the URLs carry no version) or, for the vendored libraries, a day.
The page itself carries a fresh CSP nonce each time (server/web/headers.py): compressed, never
cached.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
from functools import lru_cache
from pathlib import Path

from flask import Blueprint, Response, request
from flask.blueprints import BlueprintSetupState
from werkzeug.routing import PathConverter
from werkzeug.security import safe_join

from kernelscope.server.web.appstate import app_state
from kernelscope.server.web.errors import ApiError
from kernelscope.server.web.headers import page_html
from kernelscope.server.web.preload import DIFF_ENTRY, page_fetches, preload_links

bp = Blueprint("pages", __name__)


class PagePath(PathConverter):
    """Any path outside /api/ (an API path that matches no route stays a JSON 404/405)."""

    regex = r"(?!api(?:/|$))[^/].*?"


@bp.record_once
def _register_converter(setup: BlueprintSetupState) -> None:
    setup.app.url_map.converters["page"] = PagePath


COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")
MIN_GZIP_BYTES = 512
VENDOR_MAX_AGE_S = 86400


@lru_cache(maxsize=256)
def _load(path: str, mtime_ns: int, size: int) -> tuple[bytes, bytes | None, str]:
    """(raw, gzipped or None, etag) of a file; keyed by mtime and size, so edits show."""
    raw = Path(path).read_bytes()
    kind = _mimetype(path)
    packed = None
    if len(raw) >= MIN_GZIP_BYTES and kind.startswith(COMPRESSIBLE):
        packed = gzip.compress(raw, compresslevel=6, mtime=0)
    return raw, packed, hashlib.sha256(raw).hexdigest()[:20]


def _mimetype(path: str) -> str:
    if path.endswith((".js", ".mjs")):
        return "text/javascript"
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def _send(path: Path, cache_control: str, status: int = 200) -> Response:
    stat = path.stat()
    raw, packed, digest = _load(str(path), stat.st_mtime_ns, stat.st_size)
    zipped = packed is not None and "gzip" in request.headers.get("Accept-Encoding", "")
    etag = f"{digest}-gz" if zipped else digest
    headers = {"Cache-Control": cache_control, "ETag": f'"{etag}"', "Vary": "Accept-Encoding"}
    if status == 200 and request.if_none_match.contains(etag):
        return Response(status=304, headers=headers)
    body = packed if zipped and packed is not None else raw
    if zipped:
        headers["Content-Encoding"] = "gzip"
    return Response(body, status=status, mimetype=_mimetype(str(path)), headers=headers)


def _index(status: int = 200, fetches: list[str] | None = None,
           entries: tuple[str, ...] = ()) -> Response:
    """The page; `fetches`: the API answers it reads first, and `entries`: the modules it
    imports beside main.js, both preloaded (server/web/preload.py)."""
    state = app_state()
    index = state.webui_dir / "index.html"
    if not index.is_file():
        raise ApiError(f"the web UI is missing: no index.html in {state.webui_dir}", 404)
    # Every answer carries its own CSP nonce (server/web/headers.py), so the page is rendered
    # per request and never cached (it is compressed all the same).
    links = preload_links(state.webui_dir, fetches or [], entries)
    page = page_html(index.read_text(encoding="utf-8"), state.cdn, links).encode()
    headers = {"Cache-Control": "no-store", "Vary": "Accept-Encoding"}
    if "gzip" in request.headers.get("Accept-Encoding", "") and len(page) >= MIN_GZIP_BYTES:
        page = gzip.compress(page, compresslevel=6, mtime=0)
        headers["Content-Encoding"] = "gzip"
    return Response(page, status=status, mimetype="text/html", headers=headers)


@bp.get("/")
def index() -> Response:
    return _index(fetches=page_fetches(None))


@bp.get("/t/<trace_id>")
def permalink(trace_id: str) -> Response:
    found = app_state().store.exists(trace_id)
    return _index(200, page_fetches(trace_id)) if found else _index(404)


@bp.get("/diff/<a>/<b>")
def diff(a: str, b: str) -> Response:
    store = app_state().store
    found = store.exists(a) and (b == "inductor" or store.exists(b))
    return _index(200 if found else 404, entries=(DIFF_ENTRY,) if found else ())


@bp.get("/webui/<path:filename>")
def webui_file(filename: str) -> Response:
    folder = app_state().webui_dir
    joined = safe_join(str(folder), filename)
    if joined is None or not Path(joined).is_file():
        raise ApiError(f"no file {filename!r} in the web UI", 404)
    vendor = filename.startswith("vendor/")
    return _send(Path(joined), f"public, max-age={VENDOR_MAX_AGE_S}" if vendor else "no-cache")


@bp.get("/<page:unknown>")
def not_found(unknown: str) -> Response:
    return _index(404)
