"""The permalink store in PostgreSQL (psycopg 3), behind the same interface as TraceStore.

In: a `postgresql://` URL (`--db`); out: the same `put/get/exists/count` as the SQLite
store (server/store/sqlite.py), with the same content-derived ids, so the web tier and every
queue worker can share one database. One table:

    traces(id text primary key, created timestamptz, ok boolean,
           code text, options jsonb, events text)
    follow_ups(trace_id text, stage text, seq integer, event text)  -- after `done`
    trace_parts(trace_id text, key text, body text)  -- a big trace's parts (parts.py)

`events` is stored as the JSON text that streamed (jsonb would reorder keys and reject
NaN), `options` as jsonb so it can be queried. Rows are only inserted, with `ON CONFLICT
DO NOTHING`: two hosts storing the same trace store one row. Each call opens its own short
connection (a web tier thread or a worker process holds none between calls); a commit is
durable before `put` returns, as PostgreSQL's default `synchronous_commit` guarantees.

The table is created once, under a transaction-scoped advisory lock: two workers and a
web tier started together would otherwise race in `CREATE TABLE IF NOT EXISTS`, which is
not atomic in PostgreSQL (the loser dies on a `UniqueViolation` in `pg_type`). A database
that cannot be reached raises `StoreUnavailable` (server/store/spool.py holds writes meanwhile;
the API answers reads 503).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kernelscope.compiler.events.read import envelope
from kernelscope.server.store.parts import Split
from kernelscope.server.store.rows import Prepared, StoreUnavailable, TraceRows, prepare

SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    id       text PRIMARY KEY,
    created  timestamptz NOT NULL,
    ok       boolean NOT NULL,
    code     text NOT NULL,
    options  jsonb NOT NULL,
    events   text NOT NULL
);
CREATE TABLE IF NOT EXISTS follow_ups (
    trace_id text NOT NULL,
    stage    text NOT NULL,
    seq      integer NOT NULL,
    event    text NOT NULL,
    PRIMARY KEY (trace_id, stage)
);
CREATE TABLE IF NOT EXISTS trace_parts (
    trace_id text NOT NULL,
    key      text NOT NULL,
    body     text NOT NULL,
    PRIMARY KEY (trace_id, key)
)
"""
MIGRATION_LOCK = 0x6B73_7472  # pg_advisory_xact_lock key: "kstr"


class PostgresTraceStore(TraceRows):
    """Stores and returns traces in PostgreSQL; safe to share between threads."""

    marker = "%s"
    options_column = "options::text"

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self._psycopg = psycopg
        with self._connect() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(SCHEMA)

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.url, connect_timeout=5, autocommit=True)
        except self._psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL: {str(exc).strip()[:200]}") from exc

    def _row(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        try:
            return super()._row(sql, params)
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
            raise StoreUnavailable(f"PostgreSQL: {str(exc).strip()[:200]}") from exc

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return super()._all(sql, params)
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
            raise StoreUnavailable(f"PostgreSQL: {str(exc).strip()[:200]}") from exc

    def put(
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]] | Split,
        ok: bool,
    ) -> str:
        return self.put_prepared(prepare(code, options, events, ok))

    def put_prepared(self, trace: Prepared) -> str:
        try:
            with self._connect() as conn, conn.transaction():
                conn.cursor().executemany(
                    "INSERT INTO trace_parts (trace_id, key, body) VALUES (%s, %s, %s)"
                    " ON CONFLICT (trace_id, key) DO NOTHING",
                    [(trace.ident, key, body) for key, body in trace.parts.items()])
                conn.execute(
                    "INSERT INTO traces (id, created, ok, code, options, events)"
                    " VALUES (%s, %s, %s, %s, %s::jsonb, %s) ON CONFLICT (id) DO NOTHING",
                    (trace.ident, datetime.now(UTC), trace.ok, trace.code,
                     json.dumps(trace.options), trace.events),
                )
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
            raise StoreUnavailable(f"PostgreSQL: {str(exc).strip()[:200]}") from exc
        return trace.ident

    def add_follow_up(self, ident: str, event: dict[str, Any]) -> None:
        try:
            with self._connect() as conn:
                conn.execute(
                    "INSERT INTO follow_ups (trace_id, stage, seq, event) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (trace_id, stage) DO NOTHING",
                    (ident, (read := envelope(event)).stage, read.seq, json.dumps(event)),
                )
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
            raise StoreUnavailable(f"PostgreSQL: {str(exc).strip()[:200]}") from exc

    def _created(self, value: Any) -> str:
        return str(value.astimezone(UTC).isoformat(timespec="seconds"))
