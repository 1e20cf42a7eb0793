"""What every trace store shares: content-derived ids, the reading queries, the interface.

A trace is its row (the events through `done`, never updated) and the events of its
follow-ups (server/jobs/followups.py), rows of their own appended after `done`; its id is
derived from the trace as it was at `done`.

In: a finished trace (code, options, events). Out: its id (`trace_id`, the same on every
host and store) and, for a SQL store, the queries that read it back (`TraceRows`). The
SQLite store (server/store/sqlite.py) and the PostgreSQL one (server/store/postgres.py) both
build on
this module and never on each other.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from typing import Any, Protocol

from kernelscope.compiler.events.read import envelope

ALPHABET = string.digits + string.ascii_letters
ID_LENGTH = 12
ID_PATTERN = re.compile(r"^[0-9A-Za-z]{10,32}$")

class StoreUnavailable(Exception):
    """The database cannot be reached now (the API answers 503 with Retry-After)."""


def base62(data: bytes) -> str:
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, rem = divmod(n, 62)
        out.append(ALPHABET[rem])
    return "".join(reversed(out)) or "0"


def trace_id(code: str, options: dict[str, Any], events: list[dict[str, Any]]) -> str:
    """base62(sha256(content)), first 12 characters (about 71 bits)."""
    blob = json.dumps(
        {"code": code, "options": options, "events": events}, sort_keys=True, separators=(",", ":")
    )
    return base62(hashlib.sha256(blob.encode()).digest())[:ID_LENGTH]


def stamped(code: str, options: dict[str, Any], events: list[dict[str, Any]]
            ) -> tuple[str, list[dict[str, Any]]]:
    """A finished trace's id, and its events as stored: `done` carries the id."""
    ident = trace_id(code, options, events)
    stored = [dict(e) for e in events]
    last = envelope(stored[-1]) if stored else None
    if last is not None and last.stage == "done":
        stored[-1] = {**stored[-1], "data": {**last.data, "trace_id": ident}}
    return ident, stored


class TraceRows:
    """The reading half of a SQL trace store (SQLite here, PostgreSQL in server/store/postgres.py):
    one query each. A store gives `_connect` (a connection as a context manager), its
    parameter marker, how it reads `options` as text and how `created` reads back."""

    marker = "?"
    options_column = "options"

    def _connect(self) -> Any:
        raise NotImplementedError

    def _created(self, value: Any) -> str:
        return str(value)

    def _row(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        with self._connect() as conn:
            return conn.execute(sql.replace("?", self.marker), params).fetchone()

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self._connect() as conn:
            return list(conn.execute(sql.replace("?", self.marker), params).fetchall())

    def get(self, ident: str) -> dict[str, Any] | None:
        if not ID_PATTERN.match(ident):
            return None
        row = self._row(f"SELECT id, created, ok, code, {self.options_column}, events "
                        "FROM traces WHERE id = ?", (ident,))
        if row is None:
            return None
        later = self._all("SELECT event FROM follow_ups WHERE trace_id = ? ORDER BY seq",
                          (ident,))  # the follow-ups stored after `done`, in order
        return {
            "id": row[0],
            "created": self._created(row[1]),
            "ok": bool(row[2]),
            "code": row[3],
            "options": json.loads(row[4]),
            "events": [*json.loads(row[5]), *(json.loads(r[0]) for r in later)],
        }

    def exists(self, ident: str) -> bool:
        if not ID_PATTERN.match(ident):
            return False
        return self._row("SELECT 1 FROM traces WHERE id = ?", (ident,)) is not None

    def count(self) -> int:
        row = self._row("SELECT count(*) FROM traces")
        return int(row[0]) if row else 0


class Store(Protocol):
    """What the server needs of a trace store (SQLite here, PostgreSQL in
    server/store/postgres.py)."""

    def put(
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]], ok: bool
    ) -> str: ...

    def add_follow_up(self, ident: str, event: dict[str, Any]) -> None:
        """Append a follow-up's event (one per stage: a second one is ignored) to a stored
        trace; `get` returns it after `done`."""
        ...

    def get(self, ident: str) -> dict[str, Any] | None: ...

    def exists(self, ident: str) -> bool: ...

    def count(self) -> int: ...
