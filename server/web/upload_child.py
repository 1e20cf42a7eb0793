"""The child process that opens an upload (server/web/uploads.py starts it): stdin the raw
body of `POST /api/traces`, as it arrives, never parsed by the server; stdout the opened and
conformed trace `{"code", "options", "events", "notices"}` or `{"refused": reason}`. One
file that is not a `.json` is a TORCH_TRACE log (compiler/trace/torch_trace_events.py).

Everything an upload costs is paid here: decoding and checking the body (its shape
refused with the same words the route used), opening the files, and the trace limit (an
opened trace larger than the server's TRACE_LIMIT_MB is refused, saying so). A module of
its own, never imported by the server, so `python -m` runs it without importing it twice.

    python -m kernelscope.server.web.upload_child TRACE_LIMIT_BYTES
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kernelscope.compiler.trace.reader import TraceRefused, open_files
from kernelscope.compiler.trace.torch_trace_events import is_log_upload, open_log_bytes
from kernelscope.server.jobs.inputs import BadInput, parse_request
from kernelscope.server.web.uploads import checked_files, conformed, within_limit


def opened(raw: bytes, limit: int) -> dict[str, Any]:
    try:
        files = checked_files(parse_request(raw))
        read = open_log_bytes(*files[0]) if is_log_upload(files) else open_files(files)
        trace = within_limit(conformed(read), limit)
    except (TraceRefused, BadInput) as e:
        return {"refused": str(e)}
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        return {"refused": f"not a list of trace files ({type(e).__name__})"}
    return {"code": trace.code, "options": trace.options, "events": trace.events,
            "notices": trace.notices}


def main() -> int:
    """Reads the body, writes the answer; exits 0 either way (the answer says which)."""
    answer = opened(sys.stdin.buffer.read(), int(sys.argv[1]))
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
