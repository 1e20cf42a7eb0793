"""The child process that opens an upload (server/web/uploads.py starts it): stdin the raw
body of `POST /api/traces`, as it arrives, never parsed by the server; stdout the opened and
conformed trace as the store writes it (server/store/rows.py `prepare`): on its first line
`{"id", "code", "options", "notices", "graphs", "parts"}` (`graphs` how many, `parts` the
part keys), then the row's events as JSON text (a big trace's head), then each part's JSON
text, each on a line of its own, in that order; or `{"refused": reason}` alone. The server
stores those texts as they are, never decoding them. One file that is not a `.json` is a
TORCH_TRACE log (compiler/trace/torch_trace_events.py).

Everything an upload costs is paid here: decoding and checking the body as it arrives, each
file taken once its text is in, never the body whole beside what is decoded from it (its
shape refused with the same words parse_request and checked_files use), opening the files,
splitting a big trace into parts (server/store/parts.py) and the trace limit (a head or a
part larger than the server's TRACE_LIMIT_MB is refused, saying so). A module of its own,
never imported by the server, so `python -m` runs it without importing it twice.

    python -m kernelscope.server.web.upload_child TRACE_LIMIT_BYTES
"""

from __future__ import annotations

import codecs
import json
import sys
from typing import IO, Any

from kernelscope.compiler.events.read import envelope
from kernelscope.compiler.trace.reader import TraceRefused, open_files
from kernelscope.compiler.trace.torch_trace_events import is_log_upload, open_log_bytes
from kernelscope.server.jobs.inputs import (
    MAX_REQUEST_DEPTH,
    BadInput,
    check_request,
    no_constants,
    parse_request,
)
from kernelscope.server.store.rows import Prepared, prepare
from kernelscope.server.web.uploads import checked_files, conformed, within_limit

CHUNK = 1 << 20  # bytes of the body read at a time
NUMBER = "0123456789.eE+-"
_DECODER = json.JSONDecoder(parse_constant=no_constants)


class _Body:
    """The request body as it arrives: UTF-8 text decoded chunk by chunk, from which JSON
    values are taken one at a time, each once all its text is in (so the body is never
    held whole beside what is decoded from it)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream, self.text, self.at, self.ended = stream, "", 0, False
        self.utf8 = codecs.getincrementaldecoder("utf-8")()

    def more(self, least: int = 1) -> bool:
        """Read until at least `least` more characters are in, or the body ends; whether
        any were."""
        pieces = [self.text[self.at:]]
        start = have = len(pieces[0])
        want = have + least
        while not self.ended and have < want:
            chunk = self.stream.read(CHUNK)
            self.ended = not chunk
            try:
                pieces.append(self.utf8.decode(chunk, final=self.ended))
            except UnicodeDecodeError:
                raise BadInput("the body is not valid UTF-8") from None
            have += len(pieces[-1])
        self.text, self.at = "".join(pieces), 0
        return have > start

    def char(self) -> str:
        """The next character that is not white space ("" at the end), not taken."""
        while True:
            while self.at < len(self.text) and self.text[self.at] in " \t\n\r":
                self.at += 1
            if self.at < len(self.text) or not self.more():
                return self.text[self.at:self.at + 1]

    def take(self, expected: str) -> str:
        found = self.char()
        if found not in expected:
            raise BadInput("the body is not valid JSON")
        self.at += 1
        return found

    def value(self, depth: int) -> Any:
        """The next JSON value, checked as parse_request checks a body's, `depth` levels in;
        a value cut short by the text read so far is tried again on twice as much."""
        self.char()
        while True:
            try:
                found, end = _DECODER.raw_decode(self.text, self.at)
                # A number that ends where the text read so far does, or before an
                # exponent or fraction not yet in, may go on.
                if self.ended or (end < len(self.text) and self.text[end] not in NUMBER):
                    break
                self.more()
            except RecursionError:
                raise BadInput(f"the body is nested too deeply (limit {MAX_REQUEST_DEPTH})"
                               ) from None
            except BadInput:
                raise
            except ValueError:
                if not self.more(max(CHUNK, len(self.text) - self.at)):
                    raise BadInput("the body is not valid JSON") from None
        self.at = end
        check_request(found, MAX_REQUEST_DEPTH, depth + 1)
        return found

    def rest(self) -> bytes:
        while self.more(CHUNK):
            pass
        return self.text[self.at:].encode()


def read_files(stream: IO[bytes]) -> list[tuple[str, bytes]]:
    """The body's files as (name, bytes), read as it arrives: `{"files": [...], ...}`, each
    file taken as soon as it is in; any other body is read whole and refused as
    parse_request and checked_files refuse it, with their words."""
    body = _Body(stream)
    if body.char() != "{":
        return checked_files(parse_request(body.rest()))
    body.take("{")
    found: dict[str, Any] = {}
    if body.char() == "}":
        body.take("}")
    else:
        while True:
            key = body.value(1)
            if not isinstance(key, str):
                raise BadInput("the body is not valid JSON")
            body.take(":")
            found[key] = _files(body) if key == "files" and body.char() == "[" \
                else body.value(1)
            if body.take(",}") == "}":
                break
    if body.char() != "":
        raise BadInput("the body is not valid JSON")
    return checked_files(found)


def _files(body: _Body) -> list[Any]:
    """The `files` array, each item decoded once it is in."""
    body.take("[")
    items: list[Any] = []
    if body.char() == "]":
        body.take("]")
        return items
    while True:
        items.append(body.value(2))
        if body.take(",]") == "]":
            return items


def opened(stream: IO[bytes], limit: int) -> tuple[dict[str, Any], Prepared | None]:
    """The answer's first line, and the trace as the store writes it."""
    try:
        files = read_files(stream)
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
    answer, trace = opened(sys.stdin.buffer, int(sys.argv[1]))
    sys.stdout.write(json.dumps(answer))
    if trace is not None:
        sys.stdout.write("\n" + trace.events)
        for text in trace.parts.values():
            sys.stdout.write("\n" + text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
