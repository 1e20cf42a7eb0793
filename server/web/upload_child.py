"""The child process that opens an upload (server/web/uploads.py starts it): stdin the raw
body of `POST /api/traces`, as it arrives, never parsed by the server; stdout the opened and
conformed trace `{"code", "options", "events", "notices", "parts"}` on its first line (a big
trace's head, `parts` its part keys), then each part's JSON text on a line of its own, in
that order; or `{"refused": reason}`. One file that is not a `.json` is a TORCH_TRACE log
(compiler/trace/torch_trace_events.py).

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

from kernelscope.compiler.trace.reader import TraceRefused, open_files
from kernelscope.compiler.trace.torch_trace_events import is_log_upload, open_log_bytes
from kernelscope.server.jobs.inputs import BadInput, parse_request
from kernelscope.server.store.parts import Split
from kernelscope.server.web.uploads import checked_files, conformed, within_limit


def opened(raw: bytes, limit: int) -> tuple[dict[str, Any], dict[str, str]]:
    """The answer's first line, and the parts' texts by key."""
    try:
        files = checked_files(parse_request(raw))
        read = conformed(open_log_bytes(*files[0]) if is_log_upload(files)
                         else open_files(files))
        stored = within_limit(read, limit)
    except (TraceRefused, BadInput) as e:
        return {"refused": str(e)}, {}
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        return {"refused": f"not a list of trace files ({type(e).__name__})"}, {}
    parts = stored.parts if isinstance(stored, Split) else {}
    events = stored.head if isinstance(stored, Split) else stored
    return {"code": read.code, "options": read.options, "events": events,
            "notices": read.notices, "parts": list(parts)}, parts


def main() -> int:
    """Reads the body, writes the answer; exits 0 either way (the answer says which)."""
    answer, parts = opened(sys.stdin.buffer.read(), int(sys.argv[1]))
    sys.stdout.write(json.dumps(answer))
    for text in parts.values():
        sys.stdout.write("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
