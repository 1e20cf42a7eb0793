"""A trace stored whole, served in parts all the same: split when it is read, and kept.

In: a stored trace's head as stored (server/store/raw.py) and a store to read it from.
Out: for a trace whose row's events take more than `READ_SPLIT_CHARS`, its head with stubs
and `parts` (as a trace stored in parts answers), and each part's text, the same parts
`split` makes (server/store/parts.py), so a client opens it one graph at a time.

Why on reading and not at storing: a trace between 1 and 4 MiB keeps its id and its row,
and a reader that wants it whole (the diff) reads it as before. A split costs its
decode and the split itself (45-90 ms for the 6-block training step's 3.2 MB at load 6.6
on this 2-core host; the head read again from the kept split, 5-11 ms), once per process:
the result is kept, at most `budget` chars of text over every trace kept, the least
recently read dropped first. A part's text keeps the
stored key order (not `dumps`'s sorted keys), so the parts merged back into the head give
the row's events byte for byte. Two readers of one trace at once split it once: the
split holds the lock, and it never yields (no I/O in it).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from kernelscope.server.store.parts import Split, key_for, split
from kernelscope.server.store.raw import StoredHead
from kernelscope.server.store.rows import Store

READ_SPLIT_CHARS = 1 << 20  # a trace stored whole whose events take more is served in parts
BUDGET_CHARS = 64 << 20

Made = tuple[str, dict[str, str]] | None  # a split's head text and parts; None: no parts


def ordered(value: Any) -> str:
    """A part's text in its entries' own key order, so merging it back is byte-exact."""
    return json.dumps(value, separators=(",", ":"))


def big(stored: StoredHead) -> bool:
    """Whether a stored trace is one `ReadSplits` splits: stored whole, and big."""
    return not stored.fields.get("parts") and len(stored.events) > READ_SPLIT_CHARS


def split_stored(stored: StoredHead) -> Made:
    """A big trace's row as a head (its events' text) and parts; None: nothing to part."""
    events = json.loads(stored.events)
    parted: Split = split(events, key_for(events), text=ordered)
    return (json.dumps(parted.head), parted.parts) if parted.parts else None


@dataclass
class ReadSplits:
    """Each big whole trace's split, made on its first read and kept (least recent out)."""

    budget: int = BUDGET_CHARS
    _kept: OrderedDict[str, Made] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def head(self, store: Store, ident: str) -> StoredHead | None:
        """The trace's head as `GET /api/traces/<id>?split=1` answers it: a big trace stored
        whole as a split one's head (`parts` each key's size); any other as stored."""
        stored = store.stored_head(ident)
        found = None if stored is None or not big(stored) else self._split(ident, stored)
        if stored is None or found is None:
            return stored
        text, parts = found
        fields = {**stored.fields, "parts": {k: len(v) for k, v in sorted(parts.items())}}
        return StoredHead(fields, stored.options, text, stored.later)

    def part(self, store: Store, ident: str, key: str) -> str | None:
        """A part of a big trace stored whole, or None (no such trace, or not split)."""
        with self._lock:
            kept, found = ident in self._kept, self._kept.get(ident)
        if not kept:
            stored = store.stored_head(ident)
            found = self._split(ident, stored) if stored is not None and big(stored) else None
        return None if not found else found[1].get(key)

    def _split(self, ident: str, stored: StoredHead) -> Made:
        with self._lock:
            if ident not in self._kept:
                self._kept[ident] = split_stored(stored)
                self._trim()
            self._kept.move_to_end(ident)
            return self._kept[ident]

    def _trim(self) -> None:
        size = lambda v: 1 if v is None else len(v[0]) + sum(map(len, v[1].values()))  # noqa: E731
        total = sum(size(v) for v in self._kept.values())
        while total > self.budget and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            total -= size(dropped)
