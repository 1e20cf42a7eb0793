"""Which buffers each functional collective holds, for the memory plan: a collective may
read its input and write its result until its `wait_tensor` runs, and `wait_tensor(t)`
returns `t` itself. schedule/memory.py extends lifetimes by this, so nothing a collective
holds is freed or reused before its wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelscope.compiler.ir.collectives import collective_kind, waited_buffer
from kernelscope.compiler.ir.nodes import ExternKernel, TensorArg


@dataclass
class Hold:
    buffer: str
    collective: str  # the step that starts the collective
    wait: str  # the step that waits on it ("" if the graph never does)
    why: str  # "input" (the collective may still read it) or "result" (it writes it)


@dataclass
class CollectiveHolds:
    holds: list[Hold] = field(default_factory=list)
    until: dict[str, int] = field(default_factory=dict)  # buffer -> held at least to this step
    aliases: dict[str, str] = field(default_factory=dict)  # a wait's result -> the result


def tensor_names(args: object) -> list[str]:
    """The buffer names of the TensorArgs in an extern call's (nested) arguments."""
    if isinstance(args, TensorArg):
        return [args.name]
    if isinstance(args, (list, tuple)):
        return [n for a in args for n in tensor_names(a)]
    if isinstance(args, dict):
        return tensor_names(list(args.values()))
    return []


def collective_holds(names: Sequence[str], externs: Sequence[ExternKernel | None]
                     ) -> CollectiveHolds:
    """`names[i]`, `externs[i]`: step i's name and its extern call (None for a kernel)."""
    out = CollectiveHolds()
    waits = {waited_buffer(e): (i, e.name) for i, e in enumerate(externs)
             if e is not None and waited_buffer(e) is not None}
    # Every wait's result is the tensor it waits on, whatever made it (a coalesced
    # collective is an ATen fallback: the wait still returns its output itself).
    out.aliases = {result: waited for waited, (_i, result) in waits.items()
                   if waited is not None}
    end = len(names) - 1
    for i, ext in enumerate(externs):
        if ext is None or collective_kind(ext.op) is None:
            continue
        w, result = waits.get(ext.name, (end, None))
        wait = names[w] if result is not None else ""
        for name in tensor_names((ext.args, ext.kwargs)):
            out.holds.append(Hold(name, names[i], wait, "input"))
            out.until[name] = max(out.until.get(name, w), w)
        out.holds.append(Hold(ext.name, names[i], wait, "result"))
        out.until[ext.name] = max(out.until.get(ext.name, w), w)
    return out
