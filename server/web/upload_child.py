"""The child process that opens an upload (server/web/uploads.py starts it): stdin the body of
`POST /api/traces`, stdout the opened and conformed trace `{"code", "options", "events",
"notices"}` or `{"refused": reason}`. A module of its own, never imported by the server,
so `python -m` runs it without importing it twice.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from kernelscope.compiler.trace.reader import TraceRefused, open_files
from kernelscope.server.web.uploads import conformed


def main() -> int:
    """Reads the body, writes the answer; exits 0 either way (the answer says which)."""
    try:
        body = json.loads(sys.stdin.buffer.read())
        files = [(str(f["name"]), str(f["text"]).encode("utf-8")) for f in body["files"]]
        opened = conformed(open_files(files))
    except TraceRefused as e:
        answer: dict[str, Any] = {"refused": str(e)}
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        answer = {"refused": f"not a list of trace files ({type(e).__name__})"}
    else:
        answer = {"code": opened.code, "options": opened.options, "events": opened.events,
                  "notices": opened.notices}
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
