"""Input mutations written in place: `p.add_(u)` stores into p's own memory.

AOTAutograd's functionalized graph returns each mutated input's new value and copies it
back (`p.copy_(new)`). When the kernel computing it may write over the input, the wrapper
gives it the input's storage, and the copy back, onto itself, is skipped by ATen.

A kernel may write over input I when, all of them checked here:
- it is a pointwise kernel, every node of it over the same loop nest;
- the output and I have the same contiguous layout (same dtype, offset 0);
- no later step reads I, and no step at all reads I after another writes the output;
- inside the kernel, I and every buffer the kernel computes are read only at the element
  being written (a shifted or broadcast read would see values already overwritten);
- in a combo kernel (schedule/horizontal.py), no other part reads I (the parts run at once).
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy

from kernelscope.compiler.ir.indexing import index_vars
from kernelscope.compiler.ir.nodes import Buffer, Layout
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.plan import ComboPlan, KernelPlan


def _contiguous(lay: Layout) -> bool:
    return lay.offset == 0 and tuple(lay.stride) == tuple(
        Layout.contiguous(lay.device, lay.dtype, lay.size).stride)


def _same_layout(a: Layout, b: Layout) -> bool:
    return (a.device == b.device and a.dtype == b.dtype and tuple(a.size) == tuple(b.size)
            and _contiguous(a) and _contiguous(b))


def _elementwise(plan: KernelPlan, inp: str) -> bool:
    if plan.kind is not KernelKind.POINTWISE:
        return False
    ranges = {tuple(n.ranges) for n in plan.nodes}
    if len(ranges) != 1:
        return False
    (nest,) = ranges
    written = {n.name for n in plan.nodes}
    for node in plan.nodes:
        identity = Layout.contiguous(node.buffer.layout.device, node.buffer.dtype,
                                     nest).index(index_vars("i", len(nest)))
        for name, indices in node.reads.items():
            if name != inp and name not in written:
                continue
            if any(sympy.expand(ix - identity) != 0 for ix in indices):
                return False
    return True


def in_place_outputs(
    candidates: Mapping[str, str],  # output buffer -> the input whose new value it is
    steps: list[tuple[list[str], set[str]]],  # per step: (writes, reads)
    plans: list[KernelPlan | None],  # per step: the kernel, None for an extern call
    buffers: Mapping[str, Buffer],
) -> dict[str, str]:
    """The candidates that may be written over their input (see the module's rules)."""
    chosen: dict[str, str] = {}
    taken: set[str] = set()
    for out, inp in candidates.items():
        if inp in taken or out not in buffers or inp not in buffers:
            continue
        if not _same_layout(buffers[out].layout, buffers[inp].layout):
            continue
        writer = next((i for i, (w, _r) in enumerate(steps) if out in w), None)
        if writer is None or plans[writer] is None:
            continue
        if any(inp in r for _w, r in steps[writer + 1:]):
            continue
        plan = _part_writing(plans[writer], out, inp)  # type: ignore[arg-type]
        if plan is None or not _elementwise(plan, inp):
            continue
        chosen[out] = inp
        taken.add(inp)
    return chosen


def _part_writing(plan: KernelPlan, out: str, inp: str) -> KernelPlan | None:
    """The kernel that writes `out`: the plan, or its part in a combo kernel where no
    other part reads `inp` (None: another does)."""
    if not isinstance(plan, ComboPlan):
        return plan
    part = plan.part_of(out)
    if part is None or any(inp in p.inputs for p in plan.parts if p is not part):
        return None
    return part
