"""A stored trace's head served as the text it was stored as, never decoded whole.

In: a trace's row (its fields, `options` and `events` as stored JSON text) and the texts
of its follow-ups' events. Out: the JSON text of `GET /api/traces/<id>` and the few events
the server reads itself (`done` and what follows it). Decoding a model's head (megabytes
of events) and encoding it again cost more CPU than the rest of the page's requests
together; only the `done` event, the last of the row, is decoded, from the row's tail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kernelscope.compiler.events.read import envelope

# How far back from the row's end `done` is looked for before the whole row is decoded.
TAIL_CHARS = 1 << 16


@dataclass(frozen=True)
class StoredHead:
    """A trace's head as stored: `fields` (id, created, ok, code, parts), `options` and
    `events` as JSON text, and each follow-up event's text after them, in order."""

    fields: dict[str, Any]
    options: str
    events: str
    later: tuple[str, ...] = ()

    @classmethod
    def of(cls, record: dict[str, Any]) -> StoredHead:
        """A head already decoded (a spooled trace's), encoded once."""
        fields = {k: v for k, v in record.items() if k not in ("options", "events")}
        return cls(fields, json.dumps(record["options"]), json.dumps(record["events"]))

    def from_done(self) -> list[dict[str, Any]]:
        """`done` and every event after it, decoded; the row decoded whole only when its
        last event is not `done` (a trace stored without one)."""
        later = [json.loads(t) for t in self.later]
        last = last_element(self.events)
        if last is not None and envelope(last).stage == "done":
            return [last, *later]
        events = [*json.loads(self.events), *later]
        at = next((i for i, e in enumerate(events) if envelope(e).stage == "done"), None)
        return [] if at is None else events[at:]

    def text(self, **extra: Any) -> str:
        """`{...fields, ...extra, "options": ..., "events": [...row, ...later]}` as JSON."""
        head = json.dumps({**self.fields, **extra})
        return f'{head[:-1]}, "options": {self.options}, "events": {self._events()}}}'

    def _events(self) -> str:
        if not self.later:
            return self.events
        body = self.events.rstrip()[:-1].rstrip()
        joined = ", ".join(self.later)
        return f"{body}, {joined}]" if body != "[" else f"[{joined}]"


def last_element(array: str) -> dict[str, Any] | None:
    """The last element of a JSON array's text when it is an object, decoded alone; None
    when it is not found within TAIL_CHARS of the end. A candidate `{` inside a string or
    a nested value never decodes to the end of the array's body (a string's quotes are
    escaped; a nested value leaves closing brackets after it), so the first that does is
    the element."""
    body = array.rstrip()
    if not body.endswith("]"):
        return None
    body = body[:-1].rstrip()
    floor = max(0, len(body) - TAIL_CHARS)
    at = len(body)
    while (at := body.rfind("{", floor, at)) >= 0:
        if body[max(0, at - 8):at].rstrip()[-1:] not in (",", "["):
            continue  # not an element's start (json.dumps puts ", " between elements)
        try:
            value = json.loads(body[at:])
        except ValueError:
            continue
        return value if isinstance(value, dict) else None
    return None
