"""The permalink store: finished traces in SQLite, under content-derived ids.

In: a finished job (code, options, every event). Out: its trace id, and later the trace
JSON `{id, created, code, options, events}` for `/api/traces/<id>` and `/t/<id>`; a big
trace as its head and parts (server/store/parts.py), each part a row of `trace_parts`.

One connection per call (SQLite connections must not cross threads), WAL mode so readers
never block the writer, `synchronous=FULL` so a stored trace survives a crash. Rows are
only ever inserted, never updated: the same content always maps to the same id, and a
follow-up's event (the Inductor comparison, after `done`) is a row of its own.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelscope.compiler.events.read import envelope
from kernelscope.server.store.parts import Split
from kernelscope.server.store.postgres import PostgresTraceStore
from kernelscope.server.store.rows import (
    ID_PATTERN,
    Prepared,
    Store,
    TraceRows,
    prepare,
    trace_id,
)

__all__ = ["ID_PATTERN", "Store", "TraceStore", "is_url", "open_store", "trace_id"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    id       TEXT PRIMARY KEY,
    created  TEXT NOT NULL,
    ok       INTEGER NOT NULL,
    code     TEXT NOT NULL,
    options  TEXT NOT NULL,
    events   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS follow_ups (
    trace_id TEXT NOT NULL,
    stage    TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    event    TEXT NOT NULL,
    PRIMARY KEY (trace_id, stage)
);
CREATE TABLE IF NOT EXISTS trace_parts (
    trace_id TEXT NOT NULL,
    key      TEXT NOT NULL,
    body     TEXT NOT NULL,
    PRIMARY KEY (trace_id, key)
);
"""


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
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]] | Split,
        ok: bool,
    ) -> str:
        """Store a finished trace. `events` ends with `done`, whose trace_id is filled in;
        a big one's parts are written first, in the same transaction."""
        return self.put_prepared(prepare(code, options, events, ok))

    def put_prepared(self, trace: Prepared) -> str:
        created = datetime.now(UTC).isoformat(timespec="seconds")
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT OR IGNORE INTO trace_parts (trace_id, key, body) VALUES (?, ?, ?)",
                [(trace.ident, key, body) for key, body in trace.parts.items()])
            conn.execute(
                "INSERT OR IGNORE INTO traces (id, created, ok, code, options, events)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (trace.ident, created, int(trace.ok), trace.code, json.dumps(trace.options),
                 trace.events),
            )
            conn.execute("COMMIT")
        return trace.ident

    def add_follow_up(self, ident: str, event: dict[str, Any]) -> None:
        with self._connect() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO follow_ups (trace_id, stage, seq, event)"
                " VALUES (?, ?, ?, ?)",
                (ident, (read := envelope(event)).stage, read.seq, json.dumps(event)),
            )


def is_url(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def open_store(database: str) -> Store:
    """`--db`: a postgresql:// URL opens PostgreSQL (psycopg 3), anything else is a file."""
    if is_url(database):
        return PostgresTraceStore(database)
    return TraceStore(database)
