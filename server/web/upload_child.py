"""The child process that opens an upload (server/web/uploads.py starts it): stdin the raw
body of `POST /api/traces`, as it arrives, never parsed by the server; stdout the opened and
conformed trace as the store writes it (server/store/rows.py `prepare`): on its first line
`{"id", "code", "options", "notices", "graphs", "parts"}` (`graphs` how many, `parts` the
part keys), then the row's events as JSON text (a big trace's head), then each part's JSON
text, each on a line of its own, in that order; or `{"refused": reason}` alone. The server
stores those texts as they are, never decoding them. One file that is not a `.json` is a
TORCH_TRACE log (compiler/trace/torch_trace_events.py).

Everything an upload costs is paid here: decoding and checking the body (its shape
refused with the same words the route used), opening the files, splitting a big trace
into parts (server/store/parts.py) and the trace limit (a head or a part larger than the
server's TRACE_LIMIT_MB is refused, saying so). A module of its own, never imported by the
server, so `python -m` runs it without importing it twice.

    python -m kernelscope.server.web.upload_child TRACE_LIMIT_BYTES
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kernelscope.compiler.events.read import envelope
from kernelscope.compiler.trace.reader import TraceRefused, open_files
from kernelscope.compiler.trace.torch_trace_events import is_log_upload, open_log_bytes
from kernelscope.server.jobs.inputs import BadInput, parse_request
from kernelscope.server.store.rows import Prepared, prepare
from kernelscope.server.web.uploads import checked_files, conformed, within_limit


def opened(raw: bytes, limit: int) -> tuple[dict[str, Any], Prepared | None]:
    """The answer's first line, and the trace as the store writes it."""
    try:
        files = checked_files(parse_request(raw))
        read = conformed(open_log_bytes(*files[0]) if is_log_upload(files)
                         else open_files(files))
        trace = prepare(read.code, read.options, within_limit(read, limit), True)
    except (TraceRefused, BadInput) as e:
        return {"refused": str(e)}, None
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        return {"refused": f"not a list of trace files ({type(e).__name__})"}, None
    graphs = envelope(read.events[1]).data.get("graphs") or []  # trace_open checked it
    return {"id": trace.ident, "code": read.code, "options": read.options,
            "notices": read.notices, "graphs": len(graphs), "parts": list(trace.parts)}, trace


def main() -> int:
    """Reads the body, writes the answer; exits 0 either way (the answer says which)."""
    answer, trace = opened(sys.stdin.buffer.read(), int(sys.argv[1]))
    sys.stdout.write(json.dumps(answer))
    if trace is not None:
        sys.stdout.write("\n" + trace.events)
        for text in trace.parts.values():
            sys.stdout.write("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
