"""What the server accepts from outside: request bodies, and the events a worker prints.

In: raw request bytes (`POST /api/...`) and raw NDJSON lines from a worker. Out: plain
JSON values that are safe to store and to send again: no NaN or Infinity (JSON has none,
and a browser's `JSON.parse` rejects them), no lone surrogates (SQLite and UTF-8 cannot hold
them), and no nesting deeper than a fixed bound (deep JSON overflows Python's stack).

Requests are strict (a clear 400 names what is wrong); worker events are sanitised
(NaN becomes null, a lone surrogate becomes U+FFFD), because a snippet controls part of
what the worker prints and must not be able to break a permalink with it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_REQUEST_DEPTH = 16  # a compile request is three levels deep
MAX_EVENT_DEPTH = 64  # the deepest real event (a nested FX graph) is far below this
# A Python name, optionally dotted; fullmatch, so "a\n" does not pass as "a".
ENTRY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
MAX_ENTRY_CHARS = 200
SURROGATE = re.compile("[\ud800-\udfff]")


class BadInput(ValueError):
    """A request body that is not acceptable; the message says why (a 400)."""


def _no_constants(name: str) -> Any:
    raise BadInput(f"the body contains {name}, which is not JSON")


def parse_request(raw: bytes) -> Any:
    """Decode a request body strictly: UTF-8, JSON without NaN, shallow, no lone surrogates."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("the body is not valid UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_no_constants)
    except BadInput:
        raise
    except RecursionError:
        raise BadInput(f"the body is nested too deeply (limit {MAX_REQUEST_DEPTH})") from None
    except ValueError:
        raise BadInput("the body is not valid JSON") from None
    _check(value, MAX_REQUEST_DEPTH)
    return value


def _check(value: Any, max_depth: int) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise BadInput(f"the body is nested too deeply (limit {max_depth})")
        if isinstance(item, str):
            if not is_utf8(item):
                raise BadInput("the body contains a lone surrogate (\\ud800-\\udfff), not text")
        elif isinstance(item, float) and not math.isfinite(item):
            raise BadInput("the body contains a number too large for a float")
        elif isinstance(item, dict):
            stack.extend((k, depth + 1) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def entry_name_ok(name: str) -> bool:
    return len(name) <= MAX_ENTRY_CHARS and ENTRY_NAME.fullmatch(name) is not None


def parse_event_line(line: bytes) -> dict[str, Any] | None:
    """One worker NDJSON line as a JSON object, sanitised; None if it is not one."""
    line = line.strip()
    if not line.startswith(b"{"):
        return None
    try:
        obj = json.loads(line.decode("utf-8", errors="replace"), parse_constant=lambda _c: None)
        clean = sanitize(obj, MAX_EVENT_DEPTH)
    except (ValueError, RecursionError):
        return None
    return clean if isinstance(clean, dict) else None


def sanitize(value: Any, max_depth: int, depth: int = 1) -> Any:
    """A copy of `value` that JSON, UTF-8 and SQLite can all hold; ValueError if too deep."""
    if depth > max_depth:
        raise ValueError("nested too deeply")
    if isinstance(value, str):
        return value if is_utf8(value) else SURROGATE.sub("\ufffd", value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {sanitize(k, max_depth, depth + 1): sanitize(v, max_depth, depth + 1)
                for k, v in value.items()}
    if isinstance(value, list):
        return [sanitize(v, max_depth, depth + 1) for v in value]
    return value
