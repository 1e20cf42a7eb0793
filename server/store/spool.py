"""Traces written while the database is down: held on local disk, written when it returns.

In: a trace store (server/store/sqlite.py, server/store/postgres.py) and a spool folder. Out: the
same
`Store` interface, where `put` never loses a finished trace: when the database answers
`StoreUnavailable`, the trace goes to `<spool>/<id>.json` (written under a temporary name,
then renamed) and its id is returned all the same, since ids come from the content and
not from the database. `get` finds a spooled trace first, so its permalink works at once.
Every later `put`, `get` or `flush` first tries to write what is spooled (at most every
`RETRY_S`), and a spooled file is deleted only once the database holds its row.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelscope.compiler.events.read import envelope
from kernelscope.server.store.parts import Split, assemble, valid_key
from kernelscope.server.store.raw import StoredHead
from kernelscope.server.store.rows import (
    ID_PATTERN,
    Prepared,
    Store,
    StoreUnavailable,
    prepared,
)

log = logging.getLogger(__name__)
RETRY_S = 2.0


class SpoolingStore:
    """A `Store` that spools writes while its database is unavailable."""

    def __init__(self, inner: Store, folder: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()
        self._next_try = 0.0

    def spooled(self) -> list[str]:
        return sorted(p.stem for p in self.folder.glob("*.json"))

    def put(
        self, code: str, options: dict[str, Any], events: list[dict[str, Any]] | Split,
        ok: bool,
    ) -> str:
        self.flush()
        try:
            return self.inner.put(code, options, events, ok)
        except StoreUnavailable as exc:
            ident, stored, parts = prepared(code, options, events)
            raw = events if isinstance(events, list) else \
                {"head": events.head, "parts": events.parts}
            record = {"id": ident, "created": datetime.now(UTC).isoformat(timespec="seconds"),
                      "ok": ok, "code": code, "options": options, "events": stored,
                      "parts": parts, "raw_events": raw}  # fmt: skip
            self._spool(ident, json.dumps(record), exc)
            return ident

    def put_prepared(self, trace: Prepared) -> str:
        """As `put`; a spooled record holds the events' text as given, never decoded."""
        self.flush()
        try:
            return self.inner.put_prepared(trace)
        except StoreUnavailable as exc:
            fields = json.dumps({
                "id": trace.ident, "created": datetime.now(UTC).isoformat(timespec="seconds"),
                "ok": trace.ok, "code": trace.code, "options": trace.options,
                "parts": trace.parts})  # fmt: skip
            self._spool(trace.ident, f'{fields[:-1]}, "events": {trace.events}}}', exc)
            return trace.ident

    def _spool(self, ident: str, text: str, why: Exception) -> None:
        tmp = self.folder / f".{ident}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.folder / f"{ident}.json")
        log.warning("trace %s spooled to %s: %s", ident, self.folder, why)

    def add_follow_up(self, ident: str, event: dict[str, Any]) -> None:
        """Like `put`: spooled to `<spool>/<id>-<stage>.followup` while the database is
        down, written after its trace."""
        self.flush()
        try:
            self.inner.add_follow_up(ident, event)
        except StoreUnavailable as exc:
            stage = envelope(event).stage
            tmp = self.folder / f".{ident}-{stage}.tmp"
            tmp.write_text(json.dumps({"id": ident, "event": event}))
            os.replace(tmp, self.folder / f"{ident}-{stage}.followup")
            log.warning("follow-up %s of trace %s spooled: %s", stage, ident, exc)

    def _spooled_follow_ups(self, ident: str) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.folder.glob(f"{ident}-*.followup")):
            try:
                out.append(json.loads(path.read_text())["event"])
            except (OSError, ValueError, KeyError):
                continue
        return out

    def _spooled(self, ident: str) -> dict[str, Any] | None:
        if not ID_PATTERN.match(ident):
            return None
        try:
            record: dict[str, Any] = json.loads((self.folder / f"{ident}.json").read_text())
        except (OSError, ValueError):
            return None
        record.pop("raw_events", None)
        record.setdefault("parts", {})
        return record

    def get(self, ident: str) -> dict[str, Any] | None:
        return self._read(ident, whole=True)

    def head(self, ident: str) -> dict[str, Any] | None:
        return self._read(ident, whole=False)

    def stored_head(self, ident: str) -> StoredHead | None:
        """The database's row as stored; a spooled trace, or one with spooled follow-ups,
        read as `head` reads it."""
        self.flush()
        if self._spooled(ident) is None and not self._spooled_follow_ups(ident):
            return self.inner.stored_head(ident)
        record = self.head(ident)
        return None if record is None else StoredHead.of(record)

    def part(self, ident: str, key: str) -> str | None:
        self.flush()
        record = self._spooled(ident)
        if record is None:
            return self.inner.part(ident, key)
        text = record["parts"].get(key) if valid_key(key) else None
        return text if isinstance(text, str) else None

    def _read(self, ident: str, whole: bool) -> dict[str, Any] | None:
        """A trace spooled or stored, its spooled follow-ups added: whole, or its head."""
        self.flush()
        record = self._spooled(ident)
        if record is not None and whole:
            record["events"] = assemble(record["events"], record.pop("parts"))
        elif record is not None:
            record["parts"] = {k: len(v) for k, v in record["parts"].items()}
        else:
            record = self.inner.get(ident) if whole else self.inner.head(ident)
        if record is not None:
            have = {envelope(e).stage for e in record["events"]}
            later = [e for e in self._spooled_follow_ups(ident) if envelope(e).stage not in have]
            record["events"] = sorted([*record["events"], *later], key=lambda e: envelope(e).seq)
        return record

    def exists(self, ident: str) -> bool:
        if ID_PATTERN.match(ident) and (self.folder / f"{ident}.json").exists():
            return True
        return self.inner.exists(ident)

    def count(self) -> int:
        return self.inner.count() + len(self.spooled())

    def _drain(self, paths: Iterable[Path], what: str, write: Callable[[Any], object]) -> int:
        """Each spooled record in name order written and its file removed, until the
        database is unavailable; an unreadable one is logged and left. How many."""
        written = 0
        for path in sorted(paths):
            try:
                write(json.loads(path.read_text()))
            except StoreUnavailable:
                break
            except (OSError, ValueError, KeyError):
                log.exception("spooled %s %s is unreadable; left in place", what, path.name)
                continue
            path.unlink(missing_ok=True)
            written += 1
        return written

    def _write(self, record: dict[str, Any]) -> None:
        """A spooled trace into the database: as `put` was given it (its `raw_events`),
        or as `put_prepared` was."""
        if "raw_events" in record:
            self.inner.put(record["code"], record["options"], _raw(record["raw_events"]),
                           bool(record["ok"]))
        else:
            self.inner.put_prepared(_prepared(record))

    def flush(self, force: bool = False) -> int:
        """Write spooled traces to the database; how many were written."""
        now = time.monotonic()
        if not force and now < self._next_try:
            return 0
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            self._next_try = now + RETRY_S
            written = self._drain(
                self.folder.glob("*.json"), "trace",
                self._write)
            # A follow-up once its trace is in the database (one whose trace is still
            # spooled waits with it).
            self._drain(
                (p for p in self.folder.glob("*.followup")
                 if not (self.folder / f"{p.name.split('-', 1)[0]}.json").exists()),
                "follow-up", lambda r: self.inner.add_follow_up(r["id"], r["event"]))
        finally:
            self._lock.release()
        if written:
            log.info("wrote %d spooled traces to the database", written)
        return written


def _prepared(record: dict[str, Any]) -> Prepared:
    return Prepared(str(record["id"]), bool(record["ok"]), record["code"], record["options"],
                    json.dumps(record["events"]), record["parts"])


def _raw(raw: Any) -> list[dict[str, Any]] | Split:
    """What `put` was given: the events, or a Split as {"head", "parts"}."""
    return Split(raw["head"], raw["parts"]) if isinstance(raw, dict) else list(raw)
