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
are read. Checking takes about a second of CPU per MiB, so the server pays none of it: an
upload first takes one of `UPLOAD_SLOTS` (503 beyond), then its raw body is streamed, never
parsed here, to a child process (`python -m kernelscope.server.web.upload_child`) with a
wall clock, CPU and memory limit, which decodes it, opens the files, caps the notices and
splits a big trace into its head and one part per graph (server/store/parts.py), refusing
a head or a part over `TRACE_LIMIT_MB`, and prepares the trace as the store writes it (its
id, its events' text, its parts' texts); the web tier, whose streams share one process,
only waits, decodes the answer's first line (the id, counts, notices) and stores the texts
as the child wrote them, never decoding or encoding the events. Nothing stored before is
touched: the store only ever inserts.
"""

from __future__ import annotations

import json
import os
import resource
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any

from flask import Blueprint, Response, current_app, jsonify, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import RequestEntityTooLarge

from kernelscope.compiler.events.read import envelope
from kernelscope.compiler.trace.reader import MAX_FILES, Opened, TraceRefused, open_files
from kernelscope.server.jobs.inputs import loads_stepwise
from kernelscope.server.jobs.relay import off_loop
from kernelscope.server.jobs.trust import SNIPPET_STAGES, conform_data
from kernelscope.server.store.parts import Split, split_if_big, valid_key
from kernelscope.server.store.rows import ID_PATTERN, Prepared, Store
from kernelscope.server.web.appstate import app_state
from kernelscope.server.web.errors import ApiError

bp = Blueprint("uploads", __name__, url_prefix="/api")
MAX_NAME = 255
SLOT = "kernelscope.upload_slots"
OPENER = [sys.executable, "-m", "kernelscope.server.web.upload_child"]
CHUNK = 1 << 16  # bytes of the body handed on at a time


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


def within_limit(opened: Opened, limit: int,
                 key: Callable[[Mapping[str, Any]], str] | None = None
                 ) -> list[dict[str, Any]] | Split:
    """The trace as the store takes it (whole, or a big one in parts: one per graph, one
    per compile id for a TORCH_TRACE log's, or per `key` of a graph's capture entry) if it
    and each of its parts fit in `limit` bytes (the server's TRACE_LIMIT_MB, the same cap a
    job's trace has); TraceRefused names what does not, and by how much."""
    parted = split_if_big(opened.events, key)
    what, size = parted.largest() if parted else ("head", len(json.dumps(opened.events)))
    if size > limit:
        name = "the opened trace" if parted is None else \
            "its head (the events but the graphs)" if what == "head" else f"its part {what}"
        raise TraceRefused(
            f"{name} is {size / (1 << 20):.1f} MiB, over this server's trace limit of "
            f"{limit / (1 << 20):.0f} MiB (TRACE_LIMIT_MB; a big trace is stored one graph "
            "at a time, each within it): record fewer compiles or a smaller model")
    return parted if parted is not None else opened.events


def checked_files(body: Any) -> list[tuple[str, bytes]]:
    """The body's files as (name, bytes); TraceRefused says what is wrong with its shape."""
    files = body.get("files") if isinstance(body, dict) else None
    if not isinstance(files, list) or not files:
        raise TraceRefused("'files' is required: the trace directory's files, "
                           "[{\"name\": \"...json\", \"text\": \"...\"}]")
    if len(files) > MAX_FILES:
        raise TraceRefused(f"too many files ({len(files)}; limit {MAX_FILES})")
    out = []
    for i, item in enumerate(files):
        name = item.get("name") if isinstance(item, dict) else None
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name or len(name) > MAX_NAME:
            raise TraceRefused(f"files[{i}]: 'name' must be the file's name")
        if not isinstance(text, str):
            raise TraceRefused(f"files[{i}] ({name[:80]}): 'text' must be the file's text")
        out.append((name, text.encode("utf-8")))
    return out


def _limits(cpu_s: int, memory_mb: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        os.nice(5)

    return apply


@dataclass(frozen=True)
class ChildLimits:
    timeout_s: float
    memory_mb: int
    trace_bytes: int  # the largest head or part of an opened trace (TRACE_LIMIT_MB)

    @property
    def answer_bytes(self) -> int:
        """The child's whole answer: a head and parts, at most ANSWER_PARTS limits' worth."""
        return ANSWER_PARTS * self.trace_bytes + (4 << 20)


ANSWER_PARTS = 4  # an upload's trace: at most this many TRACE_LIMIT_MB in all


@dataclass(frozen=True)
class Upload:
    """An opened upload: the trace as the store writes it, and what the answer says."""

    trace: Prepared
    graphs: int
    notices: list[str]


def open_in_child(body: IO[bytes], limits: ChildLimits, repo_dir: str) -> Upload:
    """server/web/upload_child.py on the request body, streamed to it as it arrives (in a
    child process started in the checkout, whose kernelscope/ comes first on its path:
    nothing else can shadow it): the trace as the child prepared it for the store."""
    proc = subprocess.Popen([*OPENER, str(limits.trace_bytes)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=repo_dir,
                            preexec_fn=_limits(int(limits.timeout_s) + 1, limits.memory_mb))
    deadline = time.monotonic() + limits.timeout_s
    try:
        raw = _pump(proc, body, deadline, limits.answer_bytes)
    except _TooLong:
        raise ApiError(f"opening the trace took longer than {limits.timeout_s:.0f} s",
                       413) from None
    except _TooLarge:
        raise ApiError("cannot open this trace: its answer is larger than the trace limit",
                       413) from None
    finally:
        _end(proc)
    return _answer(raw, proc.returncode)


def _answer(raw: bytes, returncode: int | None) -> Upload:
    """The child's answer read: only its first line (ids, counts, notices) is decoded; the
    events and the parts stay the text the child wrote."""
    lines = raw.split(b"\n")
    try:
        answer = off_loop(loads_stepwise, lines[0])  # small, but off the event loop all the same
        refused = answer.get("refused")
    except (ValueError, IndexError, AttributeError):
        answer, refused = None, None
    if refused is not None:
        raise TraceRefused(str(refused))
    try:
        keys = [str(k) for k in answer["parts"]]
        events = lines[1].decode()
        parts = {k: lines[i + 2].decode() for i, k in enumerate(keys)}
        trace = Prepared(str(answer["id"]), True, str(answer["code"]), dict(answer["options"]),
                         events, parts)
        if not (ID_PATTERN.match(trace.ident) and all(map(valid_key, keys))
                and events.startswith("[") and events.endswith("]")):
            raise ValueError("not an answer")
        return Upload(trace, int(answer["graphs"]), [str(n) for n in answer["notices"]])
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        why = "too large to open" if returncode else "no answer"
        raise ApiError(f"cannot open this trace: {why} (the opener exited with "
                       f"{returncode})", 413 if returncode else 500) from None


class _TooLong(Exception):
    pass


class _TooLarge(Exception):
    pass


def _pump(proc: subprocess.Popen[bytes], body: IO[bytes], deadline: float, cap: int
          ) -> bytes:
    """Write `body` to the child as it arrives and read its answer (at most `cap` bytes),
    both by `deadline` (monotonic); the pipes are polled, cooperative under gevent."""
    assert proc.stdin is not None and proc.stdout is not None
    inp = proc.stdout.fileno()
    os.set_blocking(proc.stdin.fileno(), False)
    os.set_blocking(inp, False)
    out: int | None = proc.stdin.fileno()
    pending = memoryview(b"")
    got = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _TooLong()
        if out is not None and not pending:
            chunk = body.read(CHUNK)  # the client's pace (the server bounds it: gworker.py)
            if chunk:
                pending = memoryview(chunk)
            else:
                proc.stdin.close()
                out = None
        wanted = [out] if out is not None and pending else []
        readable, writable, _ = select.select([inp], wanted, [], left)
        if writable and out is not None:
            try:
                pending = pending[os.write(out, pending):]
            except BrokenPipeError:  # the child is gone: its answer (or none) says why
                pending, out = memoryview(b""), None
                proc.stdin.close()
        if readable:
            chunk = os.read(inp, 1 << 20)
            if not chunk:
                return bytes(got)
            got += chunk
            if len(got) > cap:
                raise _TooLarge()


def _end(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            stream.close()
    proc.wait()


@bp.post("/traces")
def upload() -> tuple[Response, int]:
    cfg = current_app.config
    # This route's own cap (a recorded model is larger than a compile request): a body
    # that declares more is refused (413) without reading it.
    request.max_content_length = int(cfg["UPLOAD_LIMIT_MB"]) << 20
    if not request.is_json:
        raise ApiError("expected a JSON body (Content-Type: application/json)")
    if (request.content_length or 0) > request.max_content_length:
        raise RequestEntityTooLarge()
    # The slot first: the body is read only by the one upload that holds it, and then only
    # as the child takes it, never parsed here.
    slot = current_app.extensions[SLOT]
    if not slot.acquire(blocking=False):
        raise ApiError("busy opening another trace, try again", 503, retry_after_s=5)
    try:
        upload = open_in_child(request.stream, ChildLimits(
            float(cfg["UPLOAD_TIMEOUT_S"]), int(cfg["UPLOAD_MEMORY_MB"]),
            int(cfg["TRACE_LIMIT_MB"]) << 20), str(cfg["REPO_DIR"]))
        ident = app_state().store.put_prepared(upload.trace)
    except TraceRefused as exc:
        raise ApiError(f"cannot open this trace: {exc}") from None
    finally:
        slot.release()
    return jsonify({"id": ident, "url": f"/t/{ident}", "graphs": upload.graphs,
                    "notices": upload.notices}), 201
