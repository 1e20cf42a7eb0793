"""A big trace in parts: its head (every event, each graph's entry a small stub) and one
part per graph (or per any key its writer chooses), stored and served one at a time.

In: a finished trace's events. Out: a `Split` (the head's events and each part's JSON
text), the id of a split trace, and the whole events again (`assemble`), for the readers
that need them (the diff, follow-ups, a job's replay).

A *part* is `{"graphs": {stage: [entry, ...]}}`: for each graph-carrying stage (`capture` ..
`compile`), the entries of `data.graphs` that belong to it. In the head each such entry is
a stub `{"id", "part": key, <its short scalar fields>, "lengths": {list field: length}}`, so
the page can label a graph and ask for `/api/traces/<id>/parts/<key>` when it is shown.
By default a graph is its own part (`g<id>`); a TORCH_TRACE log's trace is keyed by Dynamo
compile id (`by_compile`: `c0.1` holds compile 0/1's graphs), and its part also holds that
compile's entry of `capture.compiles` whole (its guards, raw guard tree and records), a stub
of the rest staying in the head (`split_if_big` chooses). A `capture_graph` event (the same graph,
streamed ahead of `capture`) keeps only a stub in the head, and is stored once, as its
`capture` entry.

Whether a trace is split is decided by its content alone (`WHOLE_BYTES`), and the id of a
split trace hashes its head with each part's sha256 (`digests`; server/store/rows.py), so
the same trace always keeps one id, and the web tier can store a part it never decodes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernelscope.compiler.events.read import envelope

GRAPH_STAGES = ("capture", "lowering", "scheduling", "memory", "codegen", "compile")
WHOLE_BYTES = 4 << 20  # a trace whose events take more is stored in parts
STUB_TEXT = 120  # a graph entry's string field at most this long is kept in its stub
KEY_CHARS = 64


@dataclass(frozen=True)
class Split:
    """A trace in parts: `head` its events with stubs, `parts` each part's JSON text."""

    head: list[dict[str, Any]]
    parts: dict[str, str]

    def largest(self) -> tuple[str, int]:
        """The head ("head") or the part that takes the most bytes, and how many."""
        sizes = {"head": len(dumps(self.head)),
                 **{k: len(v.encode()) for k, v in self.parts.items()}}
        key = max(sizes, key=lambda k: sizes[k])
        return key, sizes[key]


def dumps(value: Any) -> str:
    """The one serialisation of a part: the same part is the same text, hence one id."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def by_graph(graph: Mapping[str, Any]) -> str:
    """The default part of a graph: its own (`g0`, `g1`, ...)."""
    return f"g{graph['id']}"


def by_compile(graph: Mapping[str, Any]) -> str:
    """A TORCH_TRACE log's part: a Dynamo compile id's (`0/1` is `c0.1`, compiled autograd's
    `!0/0/1` is `ca0.0.1`); a graph of no compile id, its own."""
    cid = graph.get("compile_id")
    if not isinstance(cid, str) or not cid:
        return by_graph(graph)
    return "c" + cid.replace("!", "a").replace("/", ".")


COMPILE_HEAVY = ("guards", "raw", "records")  # what a compile's stub leaves to its part


def valid_key(key: str) -> bool:
    return 0 < len(key) <= KEY_CHARS and all(c.isalnum() or c in "-_.:" for c in key)


def _stub(entry: dict[str, Any], key: str) -> dict[str, Any]:
    small = {k: v for k, v in entry.items()
             if v is None or isinstance(v, bool | int | float)
             or (isinstance(v, str) and len(v) <= STUB_TEXT)}
    lengths = {k: len(v) for k, v in entry.items() if isinstance(v, list)}
    return {**small, "id": entry["id"], "part": key, "lengths": lengths}


def is_stub(entry: Any) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("part"), str)


def split(events: list[dict[str, Any]],
          key: Callable[[Mapping[str, Any]], str] = by_graph,
          text: Callable[[Any], str] = dumps) -> Split:
    """The trace in parts: each graph entry of a graph-carrying stage moved to the part
    `key(capture entry)` names (every stage's entry of one graph goes where its capture
    entry went), each part's `text` (by default `dumps`, the stored one)."""
    stages = {envelope(e).stage for e in events}
    keys: dict[Any, str] = {}
    for event in events:
        if envelope(event).stage == "capture":
            for g in envelope(event).data.get("graphs") or []:
                if isinstance(g, dict) and "id" in g:
                    keys[g["id"]] = key(g)
    bad = [k for k in keys.values() if not valid_key(k)]
    if bad:
        raise ValueError(f"a part key must be 1..{KEY_CHARS} of [A-Za-z0-9-_.:]: {bad[0]!r}")
    parts: dict[str, dict[str, list[Any]]] = {}
    head = []
    for event in events:
        stage = envelope(event).stage
        data = envelope(event).data
        if stage == "capture_graph" and "capture" in stages and data.get("id") in keys:
            # The same graph is in `capture`: a stub, filled again from its part's entry.
            head.append({**event, "data": _stub(data, keys[data["id"]])})
            continue
        graphs = envelope(event).data.get("graphs")
        if stage not in GRAPH_STAGES or not isinstance(graphs, list):
            head.append(event)
            continue
        if stage == "capture" and key is by_compile:
            event = _part_compiles(event, parts)
        kept = []
        for g in graphs:
            part = keys.get(g.get("id")) if isinstance(g, dict) else None
            if part is None:
                kept.append(g)
                continue
            parts.setdefault(part, {}).setdefault(stage, []).append(g)
            kept.append(_stub(g, part))
        head.append({**event, "data": {**envelope(event).data, "graphs": kept}})
    return Split(head, {k: text(_part(v)) for k, v in parts.items()})


def _part(entries: dict[str, list[Any]]) -> dict[str, Any]:
    compiles = entries.pop("compiles", None)
    return {"graphs": entries, **({"compiles": compiles} if compiles else {})}


def _part_compiles(event: dict[str, Any], parts: dict[str, dict[str, list[Any]]]
                   ) -> dict[str, Any]:
    """A log's capture event with each compile's heavy fields moved to its compile's part."""
    kept = []
    for c in envelope(event).data.get("compiles") or []:
        if not isinstance(c, dict) or not isinstance(c.get("compile_id"), str):
            kept.append(c)
            continue
        part = by_compile(c)
        parts.setdefault(part, {}).setdefault("compiles", []).append(c)
        kept.append({**{k: v for k, v in c.items() if k not in COMPILE_HEAVY}, "part": part,
                     "lengths": {k: len(c[k]) for k in COMPILE_HEAVY if k in c}})
    return {**event, "data": {**envelope(event).data, "compiles": kept}}


def split_if_big(events: list[dict[str, Any]],
                 key: Callable[[Mapping[str, Any]], str] | None = None) -> Split | None:
    """The trace in parts when its events take more than WHOLE_BYTES and it has graphs to
    part (by `key`; by default a TORCH_TRACE log's by compile id, any other by graph);
    None: stored whole."""
    if len(json.dumps(events)) <= WHOLE_BYTES:
        return None
    parted = split(events, key or key_for(events))
    return parted if parted.parts else None


def key_for(events: list[dict[str, Any]]) -> Callable[[Mapping[str, Any]], str]:
    """How a trace is parted unless told: a TORCH_TRACE log's (its capture says where it came
    from) by compile id, any other by graph."""
    return by_compile if _is_log(events) else by_graph


def _is_log(events: list[dict[str, Any]]) -> bool:
    return any(envelope(e).stage == "capture" and bool(envelope(e).data.get("log"))
               for e in events)


def digests(parted: Split) -> dict[str, str]:
    """Each part's sha256: what a split trace's id hashes in place of its text."""
    return {k: hashlib.sha256(v.encode()).hexdigest() for k, v in parted.parts.items()}


def merge(events: list[dict[str, Any]], part: Mapping[str, Any]) -> None:
    """A part's entries in place of their stubs in `events` (in place)."""
    graphs = part.get("graphs") or {}
    compiles = {c.get("compile_id"): c for c in part.get("compiles") or []
                if isinstance(c, dict)}
    captured = {g.get("id"): g for g in graphs.get("capture") or [] if isinstance(g, dict)}
    for event in events:
        data = envelope(event).data
        if envelope(event).stage == "capture_graph" and is_stub(data):
            event["data"] = captured.get(data.get("id"), data)
            continue
        entries = graphs.get(envelope(event).stage)
        if compiles and envelope(event).stage == "capture" and isinstance(data, dict):
            data["compiles"] = [compiles.get(c.get("compile_id"), c) if is_stub(c) else c
                                for c in data.get("compiles") or []]
        if not entries or not isinstance(data, dict) or not isinstance(data.get("graphs"), list):
            continue
        by_id = {g.get("id"): g for g in entries if isinstance(g, dict)}
        data["graphs"] = [by_id.get(g.get("id"), g) if is_stub(g) else g
                          for g in data["graphs"]]


def assemble(events: list[dict[str, Any]], parts: Mapping[str, str]) -> list[dict[str, Any]]:
    """The whole trace's events from its head (decoded, changed in place) and parts."""
    for text in parts.values():
        merge(events, json.loads(text))
    return events


def graph_bytes(stage: str, data: Mapping[str, Any]) -> dict[tuple[Any, str], int]:
    """What an event adds to each graph's part, by (graph id, stage): a graph entry of a
    graph-carrying stage, or a `capture_graph` (stored as its `capture` entry)."""
    if stage == "capture_graph" and isinstance(data.get("id"), int):
        return {(data["id"], "capture"): len(json.dumps(data))}
    graphs = data.get("graphs")
    if stage not in GRAPH_STAGES or not isinstance(graphs, list):
        return {}
    return {(g["id"], stage): len(json.dumps(g)) for g in graphs
            if isinstance(g, dict) and isinstance(g.get("id"), int)}


class Tally:
    """A trace's bytes counted as they will be stored, each against `limit`: its head (every
    line counts there before it is parsed) and each graph's part (once its event is read,
    its graphs' entries move from the head to their parts)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = 0
        self.total = 0
        self.entries: dict[tuple[Any, str], int] = {}

    def line(self, size: int) -> bool:
        """Count a line before it is parsed; False once the head is over the limit (or the
        whole, under a limit below WHOLE_BYTES: such a trace is stored whole)."""
        self.head += size
        self.total += size
        return self.head <= self.limit and (self.total <= self.limit
                                            or self.limit >= WHOLE_BYTES)

    def event(self, sizes: dict[tuple[Any, str], int]) -> Any | None:
        """Move an event's graph entries to their parts; the id of a graph whose part is now
        over the limit, or None."""
        self.head -= sum(sizes.values())
        self.entries.update(sizes)
        for gid in {g for g, _ in sizes}:
            if sum(n for (g, _), n in self.entries.items() if g == gid) > self.limit:
                return gid
        return None
