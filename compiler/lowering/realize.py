"""When a value several consumers read is stored: one rule per target, as data, chosen by
the `realize` option ("auto": the backend's, `Feature.INLINE_SHARED`).

"shared" (the default on both backends) stores it unless it is one load or one element of at
most 30 ops: C++ may compute one expression to other bits in two kernels (vector exp
against scalar expf), and consumers that must agree (a router's topk and its gathered
weights) then do not. "inline-cheap" (asked for, or a backend with that feature) is
Inductor's GPU rule (ir.py `should_realize_on_reuse`): each consumer recomputes it unless it
reads over 4 (buffer, index) pairs, has over 30 CSE'd ops, or a consumer (through views)
reads it as a tensor (an extern call, the graph output). It stores less but was slower on
the GPU for the GPT-2 step it was made for (recomputed bodies in reduction kernels), so no
backend takes it by default. "one-read" (Triton's, `Feature.RECOMPUTE_ONE_READ`) stores like
"shared" but recomputes a value that loads one element of one buffer no wider than itself
(the rest broadcast: per-row statistics, a weight) in at most 8 ops: a consumer then reads
no more bytes than the stored value would cost it, and the store is saved (the layer-norm
backward's x_hat = (x - mean) * rstd and grad * weight)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.features import Feature, Features
from kernelscope.compiler.ir.handlers import PrintHandler, body_vars, call_body, reads_of
from kernelscope.compiler.ir.nodes import Lazy
from kernelscope.compiler.ir.opnames import op_short
from kernelscope.compiler.lowering.misc import ATTENTION, GROUPED_MM
from kernelscope.compiler.lowering.registry import aten, find_lowering, prims

MAX_INLINE_ORIGINS = 24  # every rule stores a value once this many FX nodes are inlined in it
SCALAR_RECOMPUTE_OPS = 30  # a scalar stored could not fuse with a larger consumer (AdamW's)
VIEWS = frozenset({aten.view, aten.reshape, aten._unsafe_view, aten.view_copy, aten.permute,
                   aten.expand, aten.squeeze, aten.unsqueeze, aten.slice, aten.select,
                   aten.split, aten.split_with_sizes, aten.unbind, aten.alias, aten.t,
                   aten.transpose, prims.reshape, prims.transpose, prims.broadcast_in_dim})
TENSOR_READERS = frozenset({aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.convolution,
                            aten._convolution, aten.convolution_backward, aten.as_strided,
                            *ATTENTION, *GROUPED_MM})  # extern calls on their operands


@dataclass(frozen=True)
class Body:
    """What recomputing a value costs: CSE'd ops (as Inductor's OpCounterCSE counts)."""

    ops: int
    reads: int  # distinct (buffer, index) loads
    one_element: bool
    # Loads that read a new element for every element of the value (the others are
    # broadcast), and whether each is of a buffer no wider than the value's dtype.
    element_reads: int = 0
    narrow: bool = False

    @classmethod
    def of(cls, value: Lazy, dtype_of: Callable[[str], torch.dtype] | None = None) -> Body:
        printer = PrintHandler()
        call_body(value.node, printer)
        reads = sum(1 for expr in printer.cache if expr.startswith("load("))
        idx, _ = body_vars(value.node)
        dims = {v for v, n in zip(idx, value.size) if n != 1}
        full = {(r.buffer, r.index) for r in reads_of(value.node)
                if dims <= r.index.free_symbols}
        size = value.dtype.itemsize
        try:
            narrow = dtype_of is not None and all(dtype_of(b).itemsize <= size for b, _ in full)
        except KeyError:  # a buffer the graph does not know the dtype of: stored
            narrow = False
        return cls(len(printer.lines), reads, all(r == 1 for r in value.size), len(full),
                   narrow)

    def cheap(self) -> bool:  # re-read or recomputed under every rule
        return self.ops <= 1 or (self.one_element and self.ops <= SCALAR_RECOMPUTE_OPS)


@dataclass(frozen=True)
class RealizeRule:
    name: str
    inline_shared: bool  # False: every shared value that is not cheap is stored
    max_reads: int = 0
    max_ops: int = 0
    one_read_ops: int = 0  # not 0: a value of one narrow element read, at most this many ops

    def stored_because(self, users: int, body: Body, tensor_reader: str | None) -> str | None:
        """The buffer's reason for a value `users` consumers read, or None: recomputed."""
        used = f"used by {users} consumers"
        if body.cheap():
            return None
        if self.one_read_ops and tensor_reader is None and body.element_reads == 1 \
                and body.narrow and body.ops <= self.one_read_ops:
            return None
        if not self.inline_shared:
            return used
        if tensor_reader is not None:
            return f"{used}, one of them {tensor_reader}: stored once"
        if body.reads > self.max_reads:
            return f"{used} and reads {body.reads} buffers (over {self.max_reads}): stored"
        if body.ops > self.max_ops:
            return f"{used} and computes {body.ops} ops (over {self.max_ops}): stored"
        return None

    def inlined_note(self, inlined: list[str]) -> str:
        limits = f"at most {self.max_reads} reads and {self.max_ops} ops" \
            if self.inline_shared else \
            f"one element read of one buffer, at most {self.one_read_ops} ops"
        return (f"realize rule {self.name}: {len(inlined)} values read by several consumers "
                f"are recomputed in each rather than stored ({limits}, no consumer reading "
                f"a tensor): {', '.join(inlined)}")


RULES = {r.name: r for r in (RealizeRule("shared", False),
                             RealizeRule("one-read", False, one_read_ops=8),
                             RealizeRule("inline-cheap", True, max_reads=4, max_ops=30))}


def rule_for(requested: str, features: Features) -> RealizeRule:
    if requested == "auto":
        return RULES["inline-cheap" if Feature.INLINE_SHARED in features else
                     "one-read" if Feature.RECOMPUTE_ONE_READ in features else "shared"]
    if requested not in RULES:
        raise ValueError(f"realize must be one of auto, {', '.join(RULES)}, not {requested!r}")
    return RULES[requested]


def tensor_reader(node: torch.fx.Node) -> str | None:
    """A consumer of `node`'s value, through views, that reads it as a tensor, named."""
    for user in node.users:
        if user.op == "output":
            return "the graph output"
        target: Any = user.target
        packet = getattr(target, "overloadpacket", None)
        if packet in VIEWS or target is operator.getitem:
            if (found := tensor_reader(user)) is not None:
                return found
        elif packet in TENSOR_READERS or find_lowering(target) is None:
            return f"extern {op_short(target)}"
    return None
