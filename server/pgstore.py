"""The permalink store in PostgreSQL (psycopg 3), behind the same interface as TraceStore.

In: a `postgresql://` URL (`--db`); out: the same `put/get/exists/count` as the SQLite
store (server/store.py), with the same content-derived ids, so the web tier and every
queue worker can share one database. One table:

    traces(id text primary key, created timestamptz, ok boolean,
           code text, options jsonb, events text)

`events` is stored as the JSON text that streamed (jsonb would reorder keys and reject
NaN), `options` as jsonb so it can be queried. Rows are only inserted, with `ON CONFLICT
DO NOTHING`: two hosts storing the same trace store one row. Each call opens its own short
connection (a web tier thread or a worker process holds none between calls); a commit is
durable before `put` returns, as PostgreSQL's default `synchronous_commit` guarantees.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from server.store import TraceRows, stamped

SCHEMA = """
CREATE TABLE IF NOT EXISTS traces (
    id       text PRIMARY KEY,
    created  timestamptz NOT NULL,
    ok       boolean NOT NULL,
    code     text NOT NULL,
    options  jsonb NOT NULL,
    events   text NOT NULL
)
"""


class PostgresTraceStore(TraceRows):
    """Stores and returns traces in PostgreSQL; safe to share between threads."""

    marker = "%s"
    options_column = "options::text"

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self._psycopg = psycopg
        with self._connect() as conn:
            conn.execute(SCHEMA)

    def _connect(self) -> Any:
        return self._psycopg.connect(self.url, connect_timeout=10, autocommit=True)

    def put(
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]], ok: bool
    ) -> str:
        ident, stored = stamped(code, options, events)
        with self._connect() as conn:
            conn.execute(
                "INSERT INTO traces (id, created, ok, code, options, events)"
                " VALUES (%s, %s, %s, %s, %s::jsonb, %s) ON CONFLICT (id) DO NOTHING",
                (ident, datetime.now(UTC), ok, code, json.dumps(options), json.dumps(stored)),
            )
        return ident

    def _created(self, value: Any) -> str:
        return str(value.astimezone(UTC).isoformat(timespec="seconds"))
