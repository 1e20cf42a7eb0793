"""Memory plan: buffer lifetimes over the kernel order, reuse of dead buffers, peak.

One `BufferPlan` per stored buffer (bytes, first and last step, whose storage it takes)
and the peak bytes with and without reuse; the wrapper does exactly what it says.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kernelscope.compiler.ir.nodes import Buffer, ExternKernel, ExternOutput
from kernelscope.compiler.schedule.collectives import CollectiveHolds


@dataclass
class BufferPlan:
    name: str
    bytes: int
    first: int
    last: int
    output: bool
    allocated_by: str  # "wrapper", "extern" (ATen allocates its own result) or "input"
    reused_from: str | None = None
    storage: str = ""  # the buffer whose allocation this one ends up using
    held_by: str = ""  # the collective (its step) that holds it until its wait


@dataclass
class MemoryPlan:
    buffers: list[BufferPlan]
    frees: dict[int, list[str]] = field(default_factory=dict)  # after step i: del these
    peak_bytes: int = 0
    peak_bytes_no_reuse: int = 0

    def plan_of(self, name: str) -> BufferPlan | None:
        return next((b for b in self.buffers if b.name == name), None)


def plan_memory(
    steps: list[tuple[list[str], set[str]]],  # per kernel: (writes, reads)
    buffers: dict[str, Buffer],
    outputs: set[str],
    removed: set[str],
    reuse: bool = True,
    in_place: Mapping[str, str] | None = None,  # output -> the input it is written over
    collectives: CollectiveHolds | None = None,  # what each collective holds until its wait
) -> MemoryPlan:
    last_use: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, (writes, reads) in enumerate(steps):
        for w in writes:
            first.setdefault(w, i)
            last_use.setdefault(w, i)
        for r in reads:
            last_use[r] = i
    end = len(steps)
    held = collectives or CollectiveHolds()
    _hold(last_use, held, outputs, end)
    held_by = {h.buffer: h.collective for h in held.holds}
    plans: list[BufferPlan] = []
    # A buffer that dies at step i may be taken over by an allocation at step i + 1;
    # otherwise it is freed right away, so reuse never holds memory longer than needed.
    pool: list[BufferPlan] = []
    frees: dict[int, list[str]] = {}
    for i, (writes, _reads) in enumerate(steps):
        for w in writes:
            if w in removed or w not in buffers:
                continue
            buf = buffers[w]
            extern = isinstance(buf, (ExternKernel, ExternOutput)) and buf.allocates_result
            plan = BufferPlan(w, buf.layout.nbytes(), i, end - 1 if w in outputs else last_use[w],
                              w in outputs, "extern" if extern else "wrapper", storage=w,
                              held_by=held_by.get(w, ""))
            if w in held.aliases:  # a wait's result: the collective's buffer itself
                plan.storage, plan.bytes = held.aliases[w], 0
            elif in_place and w in in_place:  # inplace.py: the input's storage, not a new one
                plan.allocated_by, plan.storage, plan.bytes = "input", in_place[w], 0
            elif reuse and not extern:
                match = next((p for p in pool if _same_storage(buffers[p.name], buf)), None)
                if match is not None:
                    pool.remove(match)
                    plan.reused_from = match.name
                    plan.storage = match.storage
            plans.append(plan)
        if i > 0 and pool:
            frees.setdefault(i - 1, []).extend(p.name for p in pool)
        pool = [p for p in plans if p.last == i and not p.output and p.name not in held.aliases]
    if pool:
        frees.setdefault(end - 1, []).extend(p.name for p in pool)
    peak, peak_no_reuse = _peaks(plans, end)
    return MemoryPlan(plans, frees, peak, peak_no_reuse)


def _hold(last_use: dict[str, int], held: CollectiveHolds, outputs: set[str], end: int
          ) -> None:
    """Lifetimes a collective extends: what it holds lives to its wait, and its result as
    long as the wait's result (the same tensor) is used."""
    for name, until in held.until.items():
        if name in last_use:
            last_use[name] = max(last_use[name], until)
    for alias, result in held.aliases.items():
        alias_last = end - 1 if alias in outputs else last_use.get(alias, end - 1)
        if result in last_use:
            last_use[result] = max(last_use[result], alias_last)


def _same_storage(old: Buffer, new: Buffer) -> bool:
    a, b = old.layout, new.layout
    return (a.device == b.device and a.dtype == b.dtype
            and a.storage_numel() == b.storage_numel())


def _peaks(plans: list[BufferPlan], end: int) -> tuple[int, int]:
    """Peak live bytes: as planned (frees and reuse), and with no plan at all (every
    buffer held until the graph returns)."""
    peak = peak_no_reuse = 0
    storage_span: dict[str, tuple[int, int, int]] = {}
    for p in plans:
        lo, hi, size = storage_span.get(p.storage, (p.first, p.last, p.bytes))
        storage_span[p.storage] = (min(lo, p.first), max(hi, p.last), max(size, p.bytes))
    for step in range(end + 1):
        live = sum(s for lo, hi, s in storage_span.values() if lo <= step <= hi)
        live_no = sum(p.bytes for p in plans if p.first <= step)
        peak, peak_no_reuse = max(peak, live), max(peak_no_reuse, live_no)
    return peak, peak_no_reuse
