"""Horizontal fusion: independent pointwise kernels in a row become one combo kernel, as
Inductor's foreach kernels launch an optimizer's hundreds of tiny updates together. Each
part runs the code it would run alone over its own program ids (C++: blocks).

Consecutive pointwise steps on one device join when the target can run each as a part
and none reads or writes what another writes, counting the input an output may be
written over (schedule/inplace.py). Only neighbours join, so order and lifetimes stay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kernelscope.compiler.events.types import FusionDecision
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.plan import KernelPlan

# Pointer arguments of one combo kernel, at most (Inductor's foreach kernels stop there
# too: Triton's compile time grows with the signature).
MAX_ARGS = 250

Refuses = Callable[[KernelPlan], "str | None"]  # why a plan cannot be a part (None: it can)


@dataclass
class _Run:
    members: list[int] = field(default_factory=list)  # step indices
    plans: list[KernelPlan] = field(default_factory=list)
    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)  # with the storage each may be written over
    args: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return "+".join(p.name for p in self.plans)

    def add(self, i: int, plan: KernelPlan, writes: set[str]) -> None:
        self.members.append(i)
        self.plans.append(plan)
        self.reads |= set(plan.inputs)
        self.writes |= writes
        self.args |= set(plan.inputs) | set(plan.stores)


def combo_runs(plans: list[KernelPlan | None], refuses: Mapping[str, Refuses],
               aliases: Mapping[str, str] | None = None
               ) -> tuple[list[list[int]], list[FusionDecision]]:
    """Runs of two or more consecutive steps to launch as one kernel each, and the
    decisions made on the way (`refuses`: per device, the target's refusal of a part;
    `aliases`: output -> the input whose storage it may be written into)."""
    runs: list[list[int]] = []
    decisions: list[FusionDecision] = []
    run = _Run()
    for i, plan in enumerate(plans):
        why = _not_a_part(plan, refuses)
        if plan is None or why is not None:
            if plan is not None and run.plans:
                decisions.append(FusionDecision(run.label, plan.name, False, "combo", why or "",
                                                0))
            _close(run, runs)
            run = _Run()
            continue
        writes = _writes(plan, aliases or {})
        why = _conflict(run, plan, writes) if run.plans else None
        if why is not None:
            decisions.append(FusionDecision(run.label, plan.name, False, "combo", why, 0))
            _close(run, runs)
            run = _Run()
        elif run.plans:
            decisions.append(FusionDecision(
                run.label, plan.name, True, "combo",
                f"independent pointwise kernels on {plan.device}: one launch, the program "
                f"ids split among {len(run.plans) + 1} parts", 0))
        run.add(i, plan, writes)
    _close(run, runs)
    return runs, decisions


def _close(run: _Run, runs: list[list[int]]) -> None:
    if len(run.members) > 1:
        runs.append(run.members)


def _not_a_part(plan: KernelPlan | None, refuses: Mapping[str, Refuses]) -> str | None:
    if plan is None:
        return "an extern call (runs in ATen)"
    if plan.kind is not KernelKind.POINTWISE:
        return f"{plan.name} is a {plan.kind} kernel (only pointwise kernels are combined)"
    refuse = refuses.get(plan.device)
    return "its target makes no combo kernels" if refuse is None else refuse(plan)


def _writes(plan: KernelPlan, aliases: Mapping[str, str]) -> set[str]:
    out = set(plan.written)
    return out | {aliases[w] for w in out if w in aliases}


def _conflict(run: _Run, plan: KernelPlan, writes: set[str]) -> str | None:
    """Why `plan` cannot run beside the run's kernels (None: it can)."""
    if plan.device != run.plans[0].device:
        return "kernels on different devices"
    shared = sorted(set(plan.inputs) & run.writes)
    if shared:
        return f"{plan.name} reads {', '.join(shared[:3])}, which the run writes"
    shared = sorted(writes & (run.reads | run.writes))
    if shared:
        return f"{plan.name} writes {', '.join(shared[:3])}, which the run reads or writes"
    if len(run.args | set(plan.inputs) | set(plan.stores)) > MAX_ARGS:
        return f"more than {MAX_ARGS} pointer arguments in one kernel"
    return None
