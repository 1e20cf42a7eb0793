"""Horizontal fusion: independent pointwise kernels in a row become one combo kernel.

After vertical fusion an optimizer step is one kernel per parameter (AdamW's update of
p, exp_avg and exp_avg_sq) and one per step count: hundreds of launches of a few
microseconds of work each. Inductor's foreach / combo kernels launch them together; so
does this pass. A combo kernel's program ids are split among its parts (Triton: `if pid
< n0: part 0 elif pid < n0 + n1: part 1 ...`; C++: one OpenMP loop over every part's
blocks), so each part runs exactly the code it would run alone.

A run of consecutive steps joins one combo when every member is a pointwise kernel on
the same device that the target can run as a part, and no member reads or writes what
another writes. "Writes" counts the storage a kernel may be given by the memory plan:
an output that is a mutated input's new value (AdamW's `step += 1`) may be written over
that input (schedule/inplace.py), so its writer never joins a reader of that input.
Only neighbours are combined, so no kernel moves past another: the program's order and
the memory plan's lifetimes stay what they were.

In: the steps' kernel plans (None for an extern call), in program order. Out: the runs
to combine (step indices) and one decision per join or refusal, as data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kernelscope.compiler.events.types import FusionDecision
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.plan import KernelPlan

# Pointer arguments of one combo kernel, at most. A CUDA kernel's parameters fit in 4 KB
# (512 pointers); Inductor's foreach kernels stop at about 250 arguments, and so do we:
# Triton's compile time grows with the signature too.
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
               aliases: Mapping[str, str] | None = None, max_args: int = MAX_ARGS
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
        why = _conflict(run, plan, writes, max_args) if run.plans else None
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


def _conflict(run: _Run, plan: KernelPlan, writes: set[str], max_args: int) -> str | None:
    """Why `plan` cannot run beside the run's kernels (None: it can)."""
    if plan.device != run.plans[0].device:
        return "kernels on different devices"
    shared = sorted(set(plan.inputs) & run.writes)
    if shared:
        return f"{plan.name} reads {', '.join(shared[:3])}, which the run writes"
    shared = sorted(writes & (run.reads | run.writes))
    if shared:
        return f"{plan.name} writes {', '.join(shared[:3])}, which the run reads or writes"
    if len(run.args | set(plan.inputs) | set(plan.stores)) > max_args:
        return f"more than {max_args} pointer arguments in one kernel"
    return None
