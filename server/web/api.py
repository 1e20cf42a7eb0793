"""The JSON API (`/api/...`): compile jobs, their event streams, traces, samples, health.

In: HTTP requests from the web UI, the VS Code extension and scripts. Out: JSON, or a
stream of StageEvents (SSE or NDJSON). docs/server.md documents every route.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Response, current_app, jsonify, request

from kernelscope.compiler.compare.traces import diff_json
from kernelscope.compiler.events.read import envelope
from kernelscope.compiler.events.schema import json_schema
from kernelscope.compiler.events.stage import FOLLOW_UPS, PARTS, SCHEMA_VERSION, STAGES, TERMINAL
from kernelscope.compiler.trace.rebuild import (
    against_log,
    is_log_trace,
    logged_graph,
    rebuilt_from,
    snippet,
    why_not,
)
from kernelscope.server.jobs import info
from kernelscope.server.jobs.followups import states as follow_up_states
from kernelscope.server.jobs.inputs import BadInput, entry_name_ok, parse_request
from kernelscope.server.jobs.manager import (
    Busy,
    JobRequest,
    JobView,
    OverQuota,
    QueueUnavailable,
)
from kernelscope.server.store.parts import is_stub
from kernelscope.server.store.rows import StoreUnavailable
from kernelscope.server.web import highlight as hl
from kernelscope.server.web.appstate import app_state
from kernelscope.server.web.errors import ApiError
from kernelscope.server.web.gates import Refused
from kernelscope.server.web.hlpool import HighlightRefused
from kernelscope.server.web.logged import with_graph
from kernelscope.server.web.options import option_fields, parse_options
from kernelscope.server.web.streams import SSE_HEADERS, ndjson, sse

bp = Blueprint("api", __name__, url_prefix="/api")


def _json_body() -> dict[str, Any]:
    if not request.is_json:
        raise ApiError("expected a JSON body (Content-Type: application/json)")
    try:
        body = parse_request(request.get_data(cache=False))
    except BadInput as exc:
        raise ApiError(str(exc)) from None
    if not isinstance(body, dict):
        raise ApiError("the body must be a JSON object")
    return body


def parse_compile(body: dict[str, Any], max_code_bytes: int) -> JobRequest:
    code = body.get("code")
    if not isinstance(code, str) or not code.strip():
        raise ApiError("'code' is required: the PyTorch snippet to compile")
    if len(code.encode("utf-8")) > max_code_bytes:
        raise ApiError(f"'code' is too large (limit {max_code_bytes // 1024} KiB)")
    entry = body.get("entry")
    if entry is not None and (not isinstance(entry, str) or not entry_name_ok(entry)):
        raise ApiError("'entry' must be a Python name such as 'model' or 'Net.forward'")
    if body.get("inputs") is not None:
        # The compiler takes its inputs from the snippet (a torch.compile call, or
        # `example_inputs`); refusing beats silently ignoring them.
        raise ApiError("'inputs' is not supported: define example_inputs in the snippet")
    return JobRequest(code, parse_options(body.get("options")), entry or None)


def client_key() -> str:
    """Who is asking, for the per-client caps: the peer address (behind a proxy, the one
    PROXY_HOPS trusted proxies report: create_app applies ProxyFix)."""
    return str(request.remote_addr or "unknown")


@bp.post("/compile")
def compile_() -> tuple[Response, int]:
    job_request = parse_compile(_json_body(), current_app.config["MAX_CODE_BYTES"])
    try:
        job = app_state().jobs.submit(job_request, client_key())
    except Busy:
        raise ApiError("busy, try again", 503, retry_after_s=5) from None
    except OverQuota as exc:
        raise ApiError(str(exc), 429, retry_after_s=exc.retry_after_s) from None
    urls = {"events": f"/api/jobs/{job.id}/events", "status": f"/api/jobs/{job.id}"}
    return jsonify({"job_id": job.id, **urls}), 202


def _job(job_id: str) -> JobView:
    job = app_state().jobs.get(job_id)
    if job is None:
        raise ApiError(f"no job {job_id!r} (jobs are forgotten after a while; traces are not)", 404)
    return job


@bp.get("/jobs/<job_id>")
def job_status(job_id: str) -> Response:
    return jsonify(_job(job_id).status())


def same_origin_only() -> None:
    """Refuse (403) a request a browser sent from another site: one whose `Origin` is not
    this server's, or whose `Sec-Fetch-Site` says cross-site. A route without a JSON body
    (cancel) is one an HTML form on any page could post to; scripts and the VS Code
    extension send neither header, or this server's own origin."""
    origin = request.headers.get("Origin")
    if origin is not None and origin != "null":
        parts = urlsplit(origin)
        if (parts.scheme, parts.netloc) != (request.scheme, request.host):
            raise ApiError("cross-origin requests are refused", 403)
    elif origin == "null" or request.headers.get("Sec-Fetch-Site") == "cross-site":
        raise ApiError("cross-origin requests are refused", 403)


@bp.post("/jobs/<job_id>/cancel")
def job_cancel(job_id: str) -> tuple[Response, int]:
    """Stop a job: a queued one never starts, a running one's worker is killed. Its stream
    ends with an `error` (kind `cancelled`) and `done`; the partial trace is stored. Only
    from this server's own pages (or a script): see same_origin_only."""
    same_origin_only()
    job = _job(job_id)
    accepted = job.cancel()
    return jsonify({**job.status(), "cancelled": accepted}), 202 if accepted else 409


def _start(available: int) -> int:
    """Where a (re)connecting client resumes: after Last-Event-ID, else from the start.

    Clamped to the events that exist, so no value can replay the stream more than once.
    """
    last = request.headers.get("Last-Event-ID") or request.args.get("after")
    if last is None:
        return 0
    if len(last) > 20:
        raise ApiError("Last-Event-ID must be an event's seq")
    try:
        start = int(last) + 1
    except ValueError:
        raise ApiError("Last-Event-ID must be an event's seq") from None
    return min(max(start, 0), available)


def _stream(job: JobView, fmt: str) -> Response:
    start = _start(len(job.events))
    if job.finished and start >= len(job.events):
        # Tells an EventSource that reconnected after `done` to stop reconnecting.
        return Response(status=204)
    heartbeat = float(current_app.config["HEARTBEAT_S"])
    gate, client = app_state().streams, client_key()
    try:
        gate.acquire(job.id, client)
    except Refused as exc:
        raise ApiError(str(exc), 429, retry_after_s=heartbeat * 5) from None
    events = job.subscribe(start, heartbeat)
    if fmt == "ndjson":
        body = gate.held(job.id, client, ndjson(events))
        return Response(body, mimetype="application/x-ndjson")
    body = gate.held(job.id, client, sse(events))
    return Response(body, mimetype="text/event-stream", headers=SSE_HEADERS)


@bp.get("/jobs/<job_id>/events")
def job_events(job_id: str) -> Response:
    fmt = request.args.get("format", "sse")
    if fmt not in ("sse", "ndjson"):
        raise ApiError("format must be 'sse' or 'ndjson'")
    return _stream(_job(job_id), fmt)


@bp.get("/jobs/<job_id>/events.ndjson")
def job_events_ndjson(job_id: str) -> Response:
    return _stream(_job(job_id), "ndjson")


@bp.get("/traces/<trace_id>")
def trace(trace_id: str) -> Response:
    """The trace as stored in its row: whole, or a big trace's head with `parts` (each part's
    key and size; its graphs' entries are stubs naming their part), its events sent as the
    text stored (server/store/raw.py). With `?split=1`, a big trace stored whole answers as a
    split one does (server/store/readsplit.py)."""
    state = app_state()
    found = (state.splits.head(state.store, trace_id) if request.args.get("split") == "1"
             else state.store.stored_head(trace_id))
    if found is None:
        raise ApiError(f"no trace {trace_id!r}", 404)
    states = follow_up_states({"events": found.from_done()})
    return Response(found.text(follow_ups=states), mimetype="application/json")


@bp.get("/traces/<trace_id>/parts/<key>")
def trace_part(trace_id: str, key: str) -> Response:
    """One part of a big trace, `{"graphs": {stage: [entry, ...]}}`, as stored (never
    decoded here); content-addressed, so it may be cached for good. With `?split=1`, a part
    of a big trace stored whole (server/store/readsplit.py)."""
    state = app_state()
    text = state.store.part(trace_id, key)
    if text is None and request.args.get("split") == "1":
        text = state.splits.part(state.store, trace_id, key)
    if text is None:
        raise ApiError(f"trace {trace_id!r} has no part {key[:80]!r}", 404)
    return _part(text)


def _part(text: str) -> Response:
    return Response(text, mimetype="application/json",
                    headers={"Cache-Control": "public, max-age=31536000, immutable"})


@bp.get("/traces/<trace_id>/graphs/<int:gid>")
def trace_graph(trace_id: str, gid: int) -> Response:
    """The part that holds graph `gid` of a big trace: its own (`g<gid>`, read without the
    head), or the one its capture stub names."""
    store = app_state().store
    if (text := store.part(trace_id, f"g{gid}")) is not None:
        return _part(text)
    found = store.head(trace_id)
    if found is None:
        raise ApiError(f"no trace {trace_id!r}", 404)
    capture: dict[str, Any] = next((envelope(e).data for e in found["events"]
                                    if envelope(e).stage == "capture"), {})
    key = next((g.get("part") for g in capture.get("graphs") or []
                if is_stub(g) and g.get("id") == gid), None)
    if key is None:
        raise ApiError(f"trace {trace_id!r} has no graph {gid} stored apart", 404)
    return trace_part(trace_id, str(key))


@bp.get("/traces/<trace_id>/follow-ups")
def trace_follow_ups(trace_id: str) -> Response:
    """What a page polls after `done`: each follow-up's state and the events stored after
    `done` (small, where the whole trace can be megabytes)."""
    found = app_state().store.stored_head(trace_id)
    if found is None:
        raise ApiError(f"no trace {trace_id!r}", 404)
    events = found.from_done()
    return jsonify({"follow_ups": follow_up_states({"events": events}), "events": events[1:]})


@bp.get("/diff/<a>/<b>")
def trace_diff(a: str, b: str) -> Response:
    """Two stored traces' kernels grouped by the FX nodes they cover (b `inductor`: trace
    a's against its own Inductor follow-up), by the one matcher, compiler/compare."""
    store = app_state().store
    left = store.get(a)
    if left is not None and b != "inductor" and (log := store.head(b)) is not None \
            and is_log_trace(log["events"]):
        return _against_log(left, b)
    right = None if b == "inductor" else store.get(b)
    missing = a if left is None else b if right is None and b != "inductor" else None
    if missing is not None or left is None:
        raise ApiError(f"no trace {missing!r}", 404)
    return jsonify({"groups": diff_json(left["events"], right["events"] if right else None)})


def _against_log(left: dict[str, Any], log: str) -> Response:
    """A rebuilt graph (trace `left`) against Inductor's kernels for it as the log's trace
    holds them: the log's head and that graph's part only."""
    named = rebuilt_from(str(left.get("code") or ""))
    events = with_graph(log, named[1]) if named is not None and named[0] == log else None
    try:
        if events is None:
            raise ValueError(f"this trace is no rebuild of a graph of trace {log!r}")
        return jsonify(against_log(left["events"], events, log))
    except ValueError as exc:
        raise ApiError(str(exc)) from None


@bp.get("/traces/<trace_id>/graphs/<int:graph>/rebuild")
def trace_graph_rebuild(trace_id: str, graph: int) -> Response:
    """A logged graph of a TORCH_TRACE log's trace as a snippet Kernelscope compiles (the
    page then compiles it as any snippet: POST /api/compile), or why it cannot be."""
    events = with_graph(trace_id, graph)
    if events is None:
        raise ApiError(f"no trace {trace_id!r}", 404)
    logged = logged_graph(events, graph)
    if logged is None:
        raise ApiError(f"trace {trace_id!r} has no logged graph {graph}", 404)
    reason = why_not(logged)
    if reason is not None:
        raise ApiError(f"graph {graph} cannot be rebuilt: {reason}", 422)
    return jsonify({"code": snippet(logged, trace_id), "graph": graph,
                    "name": logged.get("name", "")})


@bp.get("/schema")
def schema() -> Response:
    """The event contract: stage names, schema version and the JSON Schema of an event."""
    return Response(_schema_text(), mimetype="application/json")


@lru_cache(maxsize=1)
def _schema_text() -> str:
    """/api/schema's answer, made once: it is made from the event types alone, and the page
    waits for it before drawing anything (20-40 ms of the server's CPU per page on a loaded
    host, among the page's twenty requests at once)."""
    return json.dumps({"version": SCHEMA_VERSION, "stages": list(STAGES), "parts": list(PARTS),
                       "follow_ups": list(FOLLOW_UPS), "terminal": list(TERMINAL),
                       "schema": json_schema()})


@bp.get("/samples")
def samples() -> Response:
    return jsonify({"samples": info.list_samples(app_state().samples_dir)})


@bp.get("/options")
def options() -> Response:
    """Every compile option a request may set: type, default, choices, what it does."""
    return jsonify({"options": option_fields()})


@bp.get("/health")
def health() -> tuple[Response, int]:
    """200 while jobs can run; 503 with a `reason` while the job queue cannot be reached
    (its own short timeout: this answers at once either way). A database that is down is
    reported (`traces` null), not a 503: stored traces are served from the spool."""
    state = app_state()
    try:
        traces: int | None = state.store.count()
    except StoreUnavailable:
        traces = None  # the database is down; health still answers
    reason = None
    try:
        jobs: dict[str, Any] | None = state.jobs.stats()
    except QueueUnavailable as exc:
        jobs, reason = None, str(exc)
    body = {
        "ok": reason is None,
        "devices": state.devices(),
        "versions": info.versions(state.settings.repo_dir),
        "isolation": state.settings.isolation.mode,
        "sandbox": state.settings.isolation.to_json(),
        "limits": vars(state.settings.limits),
        "jobs": jobs,
        "streams": state.streams.stats(),
        "traces": traces,
    }
    if reason is not None:
        body["reason"] = reason
    return jsonify(body), 200 if reason is None else 503


@bp.post("/highlight")
def highlight() -> Response:
    cfg = current_app.config
    # A lower stage's text (a large kernel's LLVM IR or PTX) may be longer than a source.
    request.max_content_length = 2 * int(cfg["HIGHLIGHT_IR_LIMIT_KB"]) * 1024 + 4096
    body = _json_body()
    code, language = body.get("code"), body.get("language", "python")
    if not isinstance(code, str):
        raise ApiError("'code' must be a string")
    if not isinstance(language, str) or language not in hl.LEXERS:
        raise ApiError(f"'language' must be one of {', '.join(hl.LEXERS)}")
    key = "HIGHLIGHT_LIMIT_KB" if language in hl.SOURCES else "HIGHLIGHT_IR_LIMIT_KB"
    limit = int(cfg[key]) * 1024
    if len(code.encode("utf-8")) > limit:
        raise ApiError(f"'code' is too large to highlight (limit {limit // 1024} KiB)", 413)
    pool = app_state().highlighter
    assert pool is not None
    try:
        html = pool.highlight(code, language, client_key())
    except HighlightRefused as exc:
        raise ApiError(str(exc), exc.status) from None
    return jsonify({"html": html, "language": language})


@bp.get("/highlight.css")
def highlight_css() -> Response:
    try:
        css = hl.stylesheet(request.args.get("style", "default"))
    except ValueError as exc:
        raise ApiError(str(exc)) from None
    return Response(css, mimetype="text/css", headers={"Cache-Control": "max-age=3600"})
