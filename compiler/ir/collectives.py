"""Functional collectives (`torch.ops._c10d_functional`): which extern calls are
collectives, what each one moves, and which buffers it holds until its `wait_tensor`.

A functional collective returns at once with a tensor the communication is still writing
(and, on NCCL, still reading its input from); `wait_tensor(t)` blocks until it is done
and returns `t` itself. Lowering makes both an extern call (lowering/collectives.py); this
module is the one place that says what they are. In: an `ExternKernel`. Out: a
`CollectiveCall` (its kind, group, bytes in and out) for the events and the explorer,
and the hold rule the memory plan obeys (schedule/memory.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernelscope.compiler.ir.nodes import ExternKernel, TensorArg

NAMESPACE = "_c10d_functional"
# Op name (in NAMESPACE) -> the collective it is, as the explorer names it.
KINDS: dict[str, str] = {
    "all_gather_into_tensor": "all-gather",
    "reduce_scatter_tensor": "reduce-scatter",
    "all_reduce": "all-reduce",
    "all_to_all_single": "all-to-all",
    "broadcast": "broadcast",
}
WAIT = "wait_tensor"


def _schema_name(op: Any) -> tuple[str, str]:
    schema = getattr(op, "_schema", None)
    if schema is None or "::" not in schema.name:
        return "", ""
    ns, name = schema.name.split("::")
    return ns, name


def collective_kind(op: Any) -> str | None:
    """"all-gather", "reduce-scatter", ... for a functional collective op, else None."""
    ns, name = _schema_name(op)
    return KINDS.get(name) if ns == NAMESPACE else None


def is_wait(op: Any) -> bool:
    return _schema_name(op) == (NAMESPACE, WAIT)


@dataclass(frozen=True)
class CollectiveCall:
    """One collective as the events show it: `bytes_in` read from `input` on this rank,
    `bytes_out` of result; `group_size` where the op names it (all-gather and
    reduce-scatter), else None."""

    kind: str
    op: str
    input: str
    group: str
    group_size: int | None
    reduce_op: str | None
    bytes_in: int
    bytes_out: int

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _named_args(ext: ExternKernel) -> dict[str, Any]:
    names = [a.name for a in ext.op._schema.arguments]
    return {**dict(zip(names, ext.args)), **ext.kwargs}


def describe_collective(ext: ExternKernel) -> CollectiveCall | None:
    """What `ext` moves, if it is a functional collective (None for anything else)."""
    kind = collective_kind(ext.op)
    if kind is None:
        return None
    args = _named_args(ext)
    inp = args.get("input")
    itemsize = ext.layout.dtype.itemsize
    numel_in = math.prod(int(s) for s in getattr(inp, "size", ()))
    return CollectiveCall(
        kind=kind, op=_schema_name(ext.op)[1],
        input=inp.name if isinstance(inp, TensorArg) else "",
        group=str(args.get("group_name", "")), group_size=args.get("group_size"),
        reduce_op=args.get("reduce_op"), bytes_in=numel_in * itemsize,
        bytes_out=ext.layout.nbytes())


def waited_buffer(ext: ExternKernel) -> str | None:
    """The buffer a `wait_tensor` call waits on (its result is that same tensor)."""
    if not is_wait(ext.op) or not ext.args or not isinstance(ext.args[0], TensorArg):
        return None
    return str(ext.args[0].name)
