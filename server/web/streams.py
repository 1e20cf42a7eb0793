"""Event streams on the wire: Server-Sent Events and NDJSON.

In: what `Job.subscribe` yields (events, or None for a stretch of silence). Out: text
chunks for a streaming Flask response. The generators take their data as arguments and
never touch the request context, so they keep working after the view has returned.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from kernelscope.compiler.events.read import envelope

SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
}


def sse(events: Iterable[dict[str, Any] | None]) -> Iterator[str]:
    """`id: <seq>` + `data: <json>` per event; a `: heartbeat` comment for silence."""
    for event in events:
        if event is None:
            yield ": heartbeat\n\n"
        else:
            seq = envelope(event).seq
            yield f"id: {seq}\ndata: {json.dumps(event, separators=(',', ':'))}\n\n"


def ndjson(events: Iterable[dict[str, Any] | None]) -> Iterator[str]:
    """One JSON object per line; an empty line is a keep-alive that readers skip."""
    for event in events:
        yield "\n" if event is None else json.dumps(event, separators=(",", ":")) + "\n"


def parse_sse(text: str) -> list[dict[str, Any]]:
    """The events in an SSE body (tests and Python clients use this)."""
    events = []
    for block in text.split("\n\n"):
        data = [line[5:].lstrip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events
