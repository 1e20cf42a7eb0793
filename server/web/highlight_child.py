"""A highlighting child (server/web/hlpool.py starts and owns it): Pygments, out of the web tier.

In: on stdin, requests framed as an 8-byte big-endian length and that many bytes of JSON
`{"code", "language"}`. Out: on stdout, an empty frame once its imports are done, then
each answer framed the same way, `{"html"}` or `{"error"}`. It serves one request after
another until stdin closes; the server kills it when one takes longer than its deadline
(a lexer can be super-linear on crafted input).
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from kernelscope.server.web.highlight import LEXERS, highlight

HEADER = 8


def read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(HEADER)
    if len(head) < HEADER:
        return None
    size = int.from_bytes(head, "big")
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(stream: IO[bytes], body: bytes) -> None:
    stream.write(len(body).to_bytes(HEADER, "big") + body)
    stream.flush()


def answer(raw: bytes) -> dict[str, Any]:
    try:
        ask = json.loads(raw)
        code, language = ask["code"], ask["language"]
        if not isinstance(code, str) or language not in LEXERS:
            return {"error": "bad request"}
        return {"html": highlight(code, language)}
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        return {"error": type(e).__name__}


def main() -> int:
    write_frame(sys.stdout.buffer, b"")  # ready: imports done
    while (raw := read_frame(sys.stdin.buffer)) is not None:
        write_frame(sys.stdout.buffer, json.dumps(answer(raw)).encode("utf-8"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
