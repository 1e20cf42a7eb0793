"""The scheduler: nodes -> fused groups -> named kernels in execution order.

In: a LoweredGraph. Out: a `Schedule`: for each step, either a fused kernel (a
KernelPlan for codegen) or an extern call, plus the fusion decisions and the buffers
that fusion keeps out of memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kernelscope.compiler.capture.modules import origin_modules
from kernelscope.compiler.events.types import (
    ComboPart,
    FusionDecision,
    ScheduledKernel,
    SchedulingGraph,
)
from kernelscope.compiler.ir.nodes import Buffer, ExternKernel
from kernelscope.compiler.ir.opnames import op_short
from kernelscope.compiler.lowering.graph import LoweredGraph
from kernelscope.compiler.schedule.fusion import Group, fuse
from kernelscope.compiler.schedule.horizontal import combo_runs
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.nodes import SchedNode, build_nodes
from kernelscope.compiler.schedule.plan import ComboPlan, KernelPlan


@dataclass
class Step:
    name: str
    kind: KernelKind
    group: Group
    plan: KernelPlan | None = None  # None for extern steps

    @property
    def extern(self) -> ExternKernel | None:
        buf = self.group.nodes[0].buffer
        return buf if isinstance(buf, ExternKernel) and self.kind is KernelKind.EXTERN else None

    def writes(self) -> list[str]:
        return [w for n in self.group.nodes for w in n.writes]

    def reads(self) -> set[str]:
        return set(self.group.reads()) - set(self.writes())


@dataclass
class Schedule:
    steps: list[Step]
    decisions: list[FusionDecision]
    removed: set[str]
    buffers: dict[str, Buffer] = field(default_factory=dict)


class KernelNamer(Protocol):
    """What the scheduler asks of the target (codegen/backend.py Backend)."""

    device: str

    def kernel_prefix(self, kind: KernelKind, rnumel: int) -> str: ...

    def combo_refusal(self, plan: KernelPlan) -> str | None: ...


def schedule(graph: LoweredGraph, target: KernelNamer, fusion: bool = True,
             op_names: dict[str, str] | None = None,
             by_device: Mapping[str, KernelNamer] | None = None, first: int = 0,
             combos: bool = False, aliases: Mapping[str, str] | None = None) -> Schedule:
    """`target` names the kernels (`by_device`: each device's, where there are several).
    Kernel names end in their step's number counted from `first`, unique across a trace.
    `combos`: neighbouring pointwise kernels launched as one (schedule/horizontal.py;
    `aliases`: output -> the input it may be written over)."""
    nodes = build_nodes(graph)
    buffers = {b.name: b for b in graph.inputs + graph.buffers}
    sizes = {name: b.layout.nbytes() for name, b in buffers.items()}
    result = fuse(nodes, sizes, enabled=fusion)
    outputs = graph.output_names()
    removed = _removed(result.groups, outputs)
    steps: list[Step] = []
    op_names = op_names or {}
    for i, group in enumerate(result.groups, first):
        kind = group.kind
        ops = _op_names(group.nodes, op_names)
        if not kind.generated:
            ext = group.nodes[0].buffer
            assert isinstance(ext, ExternKernel)
            steps.append(Step(f"extern_{op_short(ext.op)}_{i}", kind, group))
            continue
        x, r = group.shape
        namer = (by_device or {}).get(group.nodes[0].buffer.device, target)
        name = f"{namer.kernel_prefix(kind, r)}_fused_{'_'.join(ops)}_{i}"
        stores = [n.name for n in group.nodes if n.name not in removed]
        if not stores:  # nothing it computes is read anywhere: no kernel at all
            continue
        plan = KernelPlan(name, kind, x, r, group.nodes, buffers, stores)
        steps.append(Step(name, kind, group, plan))
    if not (combos and fusion):
        return Schedule(steps, result.decisions, removed, buffers)
    namers = {target.device: target, **(by_device or {})}
    runs, decisions = combo_runs([s.plan for s in steps],
                                 {d: n.combo_refusal for d, n in namers.items()}, aliases)
    return Schedule(_combined(steps, runs, namers, op_names), result.decisions + decisions,
                    removed, buffers)


def _combined(steps: list[Step], runs: list[list[int]], namers: Mapping[str, KernelNamer],
              op_names: dict[str, str]) -> list[Step]:
    """The steps with each run replaced, at its place, by one combo step."""
    first = {run[0]: run for run in runs}
    inside = {i for run in runs for i in run}
    out: list[Step] = []
    for i, step in enumerate(steps):
        if i in first:
            parts = [steps[j] for j in first[i]]
            plans = [p.plan for p in parts if p.plan is not None]
            nodes = [n for p in parts for n in p.group.nodes]
            ops = _op_names(nodes, op_names)
            prefix = namers[plans[0].device].kernel_prefix(KernelKind.COMBO, 1)
            name = f"{prefix}_fused_{'_'.join(ops)}_{step.name.rsplit('_', 1)[-1]}"
            out.append(Step(name, KernelKind.COMBO, Group(nodes), ComboPlan.of(name, plans)))
        elif i not in inside:
            out.append(step)
    return out


def _removed(groups: list[Group], outputs: set[str]) -> set[str]:
    """Buffers produced and consumed inside one kernel, and nowhere else."""
    readers: dict[str, set[int]] = {}
    for gi, g in enumerate(groups):
        for r in g.reads():
            readers.setdefault(r, set()).add(gi)
    removed = set()
    for gi, g in enumerate(groups):
        if not g.kind.generated:
            continue
        for n in g.nodes:
            if n.name not in outputs and readers.get(n.name, set()) <= {gi}:
                removed.add(n.name)
    return removed


def _op_names(nodes: list[SchedNode], op_names: dict[str, str]) -> list[str]:
    seen: list[str] = []
    position = {name: i for i, name in enumerate(op_names)}
    for n in nodes:
        for origin in sorted(n.buffer.origins, key=lambda o: position.get(o, len(position))):
            op = op_names.get(origin, origin.rstrip("0123456789_"))
            if op not in seen:
                seen.append(op)
    return seen[:5] or ["kernel"]


def schedule_json(s: Schedule, lines: dict[str, int | None], gid: int,
                  modules: dict[str, str | None] | None = None) -> SchedulingGraph:
    kernels = []
    for step in s.steps:
        origins = sorted({o for n in step.group.nodes for o in n.buffer.origins})
        x, r = step.group.shape
        parts = step.plan.parts if isinstance(step.plan, ComboPlan) else []
        if parts:
            x = sum(p.xnumel for p in parts)
        module, paths = origin_modules(origins, modules or {})
        kernels.append(ScheduledKernel(
            name=step.name, kind=step.kind.value, buffers=[n.name for n in step.group.nodes],
            numel=x, rnumel=r, origins=origins,
            lines=sorted({ln for o in origins if (ln := lines.get(o)) is not None}),
            reads=sorted(step.reads()), writes=step.writes(), module=module, modules=paths,
            parts=[ComboPart(p.name, [n.name for n in p.nodes], p.xnumel) for p in parts]))
    return SchedulingGraph(id=gid, kernels=kernels, decisions=s.decisions,
                           removed_buffers=sorted(s.removed))
