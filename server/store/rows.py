"""What every trace store shares: content-derived ids, the reading queries, the interface.

A trace is its row (the events through `done`, never updated) and the events of its
follow-ups (server/jobs/followups.py), rows of their own appended after `done`; its id is
derived from the trace as it was at `done`. A big trace's row holds its head and each of
its parts is a row of `trace_parts` (server/store/parts.py), written before the trace's
row in the same transaction: a trace that exists has all its parts.

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
from dataclasses import dataclass
from typing import Any, Protocol

from kernelscope.compiler.events.read import envelope
from kernelscope.server.store.parts import Split, assemble, digests, split_if_big, valid_key
from kernelscope.server.store.raw import StoredHead

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


def split_id(code: str, options: dict[str, Any], parted: Split) -> str:
    """A split trace's id: base62(sha256(code, options, the head's events and each part's
    sha256)), as `trace_id` is of a whole one."""
    return trace_id(code, options, [*parted.head, {"parts": digests(parted)}])


def stamped(code: str, options: dict[str, Any], events: list[dict[str, Any]],
            ident: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """A finished trace's id, and its events as stored: `done` carries the id."""
    ident = ident or trace_id(code, options, events)
    stored = [dict(e) for e in events]
    last = envelope(stored[-1]) if stored else None
    if last is not None and last.stage == "done":
        stored[-1] = {**stored[-1], "data": {**last.data, "trace_id": ident}}
    return ident, stored


def prepared(code: str, options: dict[str, Any], events: list[dict[str, Any]] | Split
             ) -> tuple[str, list[dict[str, Any]], dict[str, str]]:
    """What a store writes for a finished trace: its id, its row's events (`done` stamped)
    and its parts' texts (none for a trace stored whole)."""
    parted = events if isinstance(events, Split) else split_if_big(events)
    if parted is None:
        assert isinstance(events, list)
        return (*stamped(code, options, events), {})
    bad = [k for k in parted.parts if not valid_key(k)]
    if bad:
        raise ValueError(f"not a part key: {bad[0][:80]!r}")
    ident, head = stamped(code, options, parted.head, split_id(code, options, parted))
    return ident, head, parted.parts


@dataclass(frozen=True)
class Prepared:
    """A finished trace as a store writes it: its id, its row's fields, its row's events as
    JSON text (`done` stamped with the id) and its parts' texts. An upload's child process
    makes it (server/web/upload_child.py), so the web tier stores the texts it never
    decoded."""

    ident: str
    ok: bool
    code: str
    options: dict[str, Any]
    events: str
    parts: dict[str, str]


def prepare(code: str, options: dict[str, Any], events: list[dict[str, Any]] | Split,
            ok: bool) -> Prepared:
    """`prepared`, its events serialised: what `put_prepared` takes."""
    ident, stored, parts = prepared(code, options, events)
    return Prepared(ident, ok, code, options, json.dumps(stored), parts)


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
        """The whole trace, a split one's parts put back in place of their stubs."""
        found = self.head(ident)
        if found is None or not found.pop("parts"):
            return found
        texts = [r[0] for r in self._all("SELECT body FROM trace_parts WHERE trace_id = ?"
                                         " ORDER BY key", (ident,))]
        found["events"] = assemble(found["events"], {str(i): t for i, t in enumerate(texts)})
        return found

    def head(self, ident: str) -> dict[str, Any] | None:
        """The trace as stored in its row: a split trace's head, `parts` its part keys with
        their sizes in bytes (empty for a trace stored whole); `stored_head` decoded."""
        stored = self.stored_head(ident)
        if stored is None:
            return None
        fields = stored.fields
        return {**{k: fields[k] for k in ("id", "created", "ok", "code")},
                "options": json.loads(stored.options),
                "events": [*json.loads(stored.events), *(json.loads(t) for t in stored.later)],
                "parts": fields["parts"]}

    def stored_head(self, ident: str) -> StoredHead | None:
        """`head`'s answer with the row's options and events as the text stored, not
        decoded (server/store/raw.py)."""
        if not ID_PATTERN.match(ident):
            return None
        row = self._row(f"SELECT id, created, ok, code, {self.options_column}, events "
                        "FROM traces WHERE id = ?", (ident,))
        if row is None:
            return None
        later = self._all("SELECT event FROM follow_ups WHERE trace_id = ? ORDER BY seq",
                          (ident,))  # the follow-ups stored after `done`, in order
        parts = {str(r[0]): int(r[1]) for r in self._all(
            "SELECT key, length(body) FROM trace_parts WHERE trace_id = ? ORDER BY key",
            (ident,))}
        fields = {"id": row[0], "created": self._created(row[1]), "ok": bool(row[2]),
                  "code": row[3], "parts": parts}
        return StoredHead(fields, str(row[4]), str(row[5]), tuple(str(r[0]) for r in later))

    def part(self, ident: str, key: str) -> str | None:
        """One part's JSON text, as stored."""
        if not ID_PATTERN.match(ident) or not valid_key(key):
            return None
        row = self._row("SELECT body FROM trace_parts WHERE trace_id = ? AND key = ?",
                        (ident, key))
        return None if row is None else str(row[0])

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
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]] | Split,
        ok: bool,
    ) -> str:
        """Store a finished trace: whole, or in parts when it is big (server/store/parts.py),
        or in the parts a `Split` already holds (an upload child's, never decoded here)."""
        ...

    def put_prepared(self, trace: Prepared) -> str:
        """Store a trace `prepare` made (here or in another process), its texts as given."""
        ...

    def add_follow_up(self, ident: str, event: dict[str, Any]) -> None:
        """Append a follow-up's event (one per stage: a second one is ignored) to a stored
        trace; `get` returns it after `done`."""
        ...

    def get(self, ident: str) -> dict[str, Any] | None:
        """The whole trace `{id, created, ok, code, options, events}`."""
        ...

    def head(self, ident: str) -> dict[str, Any] | None:
        """The trace's row: `get`'s answer with a split trace's stubs, and `parts`."""
        ...

    def stored_head(self, ident: str) -> StoredHead | None:
        """`head`, its events the JSON text stored (server/store/raw.py)."""
        ...

    def part(self, ident: str, key: str) -> str | None:
        """A split trace's part (JSON text)."""
        ...

    def exists(self, ident: str) -> bool: ...

    def count(self) -> int: ...
