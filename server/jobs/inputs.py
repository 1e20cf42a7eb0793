"""What the server accepts from outside: request bodies, and the events a worker prints.

In: raw request bytes (`POST /api/...`) and raw NDJSON lines from a worker. Out: plain
JSON values that are safe to store and to send again: no NaN or Infinity (JSON has none,
and a browser's `JSON.parse` rejects them), no lone surrogates (SQLite and UTF-8 cannot hold
them), and no nesting deeper than a fixed bound (deep JSON overflows Python's stack).

Requests are strict (a clear 400 names what is wrong); worker events are sanitised
(NaN becomes null, a lone surrogate becomes U+FFFD), because a snippet controls part of
what the worker prints and must not be able to break a permalink with it.

A long line is decoded in steps (`loads_stepwise`): json.loads keeps the interpreter lock
for its whole run, and a crafted 4 MiB line of `0,0,...` held it 0.3-0.7 s on a loaded
2-core host, every request of the web tier waiting.
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


def no_constants(name: str) -> Any:
    raise BadInput(f"the body contains {name}, which is not JSON")


def parse_request(raw: bytes) -> Any:
    """Decode a request body strictly: UTF-8, JSON without NaN, shallow, no lone surrogates."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("the body is not valid UTF-8") from None
    try:
        value = json.loads(text, parse_constant=no_constants)
    except BadInput:
        raise
    except RecursionError:
        raise BadInput(f"the body is nested too deeply (limit {MAX_REQUEST_DEPTH})") from None
    except ValueError:
        raise BadInput("the body is not valid JSON") from None
    check_request(value, MAX_REQUEST_DEPTH)
    return value


def check_request(value: Any, max_depth: int, depth: int = 1) -> None:
    """BadInput unless `value` (itself `depth` deep) reaches at most `max_depth`, with no
    lone surrogate and no number too large for a float (what parse_request checks of a
    decoded body)."""
    stack: list[tuple[Any, int]] = [(value, depth)]
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
        obj = loads_stepwise(line.decode("utf-8", errors="replace"))
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


STEP_CHARS = 64 * 1024  # the most text one C decoding call of loads_stepwise reads
_WINDOWS = (256, 4096, STEP_CHARS)  # slices tried for one member, shortest first
_DECODER = json.JSONDecoder(parse_constant=lambda _c: None)  # NaN, Infinity -> None
_SPACE = re.compile(r"[ \t\n\r]*")


def loads_stepwise(text: str | bytes) -> Any:
    """json.loads(text) (NaN and Infinity as None) by C calls that each read at most
    STEP_CHARS characters, so the interpreter lock changes hands between them. An array or
    object is decoded member by member, each from a slice of the text (a member cut short
    does not parse, or ends at the slice's end: a longer slice is tried), one too long for
    the longest slice member by member in turn, and runs of members up to the last comma
    within STEP_CHARS in one call where that comma separates members (otherwise the run
    does not parse). A long string is one call (a copy, fast). ValueError as json.loads
    raises it."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if len(text) <= STEP_CHARS:
        return _DECODER.decode(text)
    value, end = _value(text, _skip(text, 0))
    if _skip(text, end) != len(text):
        raise ValueError("extra data after the JSON value")
    return value


def _value(text: str, at: int) -> tuple[Any, int]:
    """The value at `at` and where it ends, each C call within STEP_CHARS but a string's."""
    for window in _WINDOWS:
        piece = text[at:at + window]
        try:
            value, end = _DECODER.raw_decode(piece)
        except (ValueError, RecursionError):
            if at + window >= len(text):
                raise
            continue
        if end < len(piece) or at + window >= len(text):
            return value, at + end
    if text.startswith(("[", "{"), at):
        return _members(text, at)
    return _DECODER.raw_decode(text, at)


def _members(text: str, at: int) -> tuple[Any, int]:
    """The array or object at `at`, and where it ends."""
    array = text.startswith("[", at)
    closing = "]" if array else "}"
    out: Any = [] if array else {}
    at = _skip(text, at + 1)
    if text.startswith(closing, at):
        return out, at + 1
    retry = at
    while True:
        if at >= retry:
            at, retry = _run(text, at, array, out)
        if array:
            value, at = _value(text, at)
            out.append(value)
        else:
            key, at = _value(text, at)
            at = _skip(text, at)
            if not isinstance(key, str) or not text.startswith(":", at):
                raise ValueError(f"an object's key and ':' expected at {at}")
            out[key], at = _value(text, _skip(text, at + 1))
        at = _skip(text, at)
        if text.startswith(closing, at):
            return out, at + 1
        if not text.startswith(",", at):
            raise ValueError(f"',' or '{closing}' expected at {at}")
        at = _skip(text, at + 1)


def _run(text: str, at: int, array: bool, out: Any) -> tuple[int, int]:
    """Runs of whole members from `at`, each run up to the last comma within STEP_CHARS,
    added to `out`; returns where they end, and where the next run may be tried: past the
    cut of one that did not parse (it fell inside a member), so failed runs read at most
    as much text as the members decoded one by one between them."""
    while True:
        cut = text.rfind(",", at, at + STEP_CHARS)
        if cut <= at:
            return at, at
        try:
            part = _DECODER.decode(("[" if array else "{") + text[at:cut] +
                                   ("]" if array else "}"))
        except (ValueError, RecursionError):
            return at, cut
        out.extend(part) if array else out.update(part)
        at = _skip(text, cut + 1)


def _skip(text: str, at: int) -> int:
    return _SPACE.match(text, at).end()  # type: ignore[union-attr]
