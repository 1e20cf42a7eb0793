"""The permalink store: finished traces in SQLite, under content-derived ids.

In: a finished job (code, options, every event). Out: its trace id, and later the trace
JSON `{id, created, code, options, events}` for `/api/traces/<id>` and `/t/<id>`.

One connection per call (SQLite connections must not cross threads), WAL mode so readers
never block the writer, `synchronous=FULL` so a stored trace survives a crash. Rows are
only ever inserted, never updated: the same content always maps to the same id.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import string
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

ALPHABET = string.digits + string.ascii_letters
ID_LENGTH = 12
ID_PATTERN = re.compile(r"^[0-9A-Za-z]{10,32}$")

SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    id       TEXT PRIMARY KEY,
    created  TEXT NOT NULL,
    ok       INTEGER NOT NULL,
    code     TEXT NOT NULL,
    options  TEXT NOT NULL,
    events   TEXT NOT NULL
);
"""


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
    if stored and stored[-1].get("stage") == "done":
        stored[-1] = {**stored[-1], "data": {**stored[-1]["data"], "trace_id": ident}}
    return ident, stored


class TraceRows:
    """The reading half of a SQL trace store (SQLite here, PostgreSQL in server/pgstore.py):
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

    def get(self, ident: str) -> dict[str, Any] | None:
        if not ID_PATTERN.match(ident):
            return None
        row = self._row(f"SELECT id, created, ok, code, {self.options_column}, events "
                        "FROM traces WHERE id = ?", (ident,))
        if row is None:
            return None
        return {
            "id": row[0],
            "created": self._created(row[1]),
            "ok": bool(row[2]),
            "code": row[3],
            "options": json.loads(row[4]),
            "events": json.loads(row[5]),
        }

    def exists(self, ident: str) -> bool:
        if not ID_PATTERN.match(ident):
            return False
        return self._row("SELECT 1 FROM traces WHERE id = ?", (ident,)) is not None

    def count(self) -> int:
        row = self._row("SELECT count(*) FROM traces")
        return int(row[0]) if row else 0


class TraceStore(TraceRows):
    """Stores and returns traces; safe to share between threads (it holds only a path)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(SCHEMA)
        # The worker sandbox cannot see this file; where it runs without namespaces, the
        # permissions keep an unprivileged worker uid out.
        os.chmod(self.path, 0o600)

    @contextmanager  # type: ignore[override]
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        try:
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA busy_timeout=30000")
            yield conn
        finally:
            conn.close()

    def put(
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]], ok: bool
    ) -> str:
        """Store a finished trace. `events` ends with `done`, whose trace_id is filled in."""
        ident, stored = stamped(code, options, events)
        created = datetime.now(UTC).isoformat(timespec="seconds")
        with self._connect() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO traces (id, created, ok, code, options, events)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (ident, created, int(ok), code, json.dumps(options), json.dumps(stored)),
            )
        return ident


class Store(Protocol):
    """What the server needs of a trace store (SQLite here, PostgreSQL in server/pgstore.py)."""

    def put(
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]], ok: bool
    ) -> str: ...

    def get(self, ident: str) -> dict[str, Any] | None: ...

    def exists(self, ident: str) -> bool: ...

    def count(self) -> int: ...


def is_url(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def open_store(database: str) -> Store:
    """`--db`: a postgresql:// URL opens PostgreSQL (psycopg 3), anything else is a file."""
    if is_url(database):
        from server.pgstore import PostgresTraceStore

        return PostgresTraceStore(database)
    return TraceStore(database)
