"""What every lowering module shares, importable without filling the lowering table.

`LoweringContext` is what a lowering is handed as `g` (GraphLowering, lowering/graph.py,
is the one implementation): the builders of IR values and buffers, the graph-wide facts
a lowering may ask (its layout, the backend's features) and the notes it may add. A
lowering is `fn(g, node, *args, **kwargs)`: `node` is the FX node it lowers (its target,
its users, its meta), passed explicitly rather than read from the walk's position.
`Unsupported` and the small layout helpers live here too, so any module (lowering or
driver) can import them without importing the walk and, through it, every lowering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

from kernelscope.compiler.features import Features
from kernelscope.compiler.ir.nodes import (
    Buffer,
    ComputedBuffer,
    Lazy,
    Reduction,
    Stored,
    TensorValue,
)
from kernelscope.compiler.lowering.layout import LayoutDecision


def out_meta(node: torch.fx.Node) -> Any:
    """The fake tensor (or tuple of them) `node` produces: the value its lowering makes."""
    return node.meta.get("val")


class Unsupported(Exception):
    """The graph uses something this compiler cannot handle at all (e.g. dynamic shapes)."""


class LoweringBackend(Protocol):
    """What lowering asks of the graph's backend (codegen/backend.py's Backend is one):
    what it can do, and why it cannot express an op on operands of a dtype (None: it
    can), so that lowering leaves that node to ATen and says why."""

    @property
    def features(self) -> Features: ...

    def refuses(self, op: str, dtype: torch.dtype) -> str | None: ...


class LoweringContext(Protocol):
    """The graph being lowered, as its lowerings see it. Every builder is handed the node a
    body or an extern call is made for (`g.lazy(node, ...)`: its origin)."""

    layout: LayoutDecision  # the whole-graph layout (lowering/layout.py)
    features: Features  # what the graph's backend can do, less what the options turn off
    online_softmax: int | None  # rows longer than this: one-pass logsumexp (None: never)
    notes: list[str]  # what the UI should know about this graph (the lowering event)
    input_offsets: dict[str, int]  # storage offsets of the graph's real inputs
    # Channels-last copies made for convolutions, by what they copy (lowering/conv.py).
    converted: dict[tuple[int, Any], tuple[Any, Stored]]
    buffers: list[Buffer]  # the graph's buffers so far, in program order

    def new_name(self) -> str: ...  # the next buffer's name (`buf7`)

    def lazy(self, node: torch.fx.Node, inner_fn: Callable[..., Any], size: Sequence[int],
             dtype: torch.dtype, inputs: Sequence[Any] = ()) -> Lazy: ...

    def realize(self, value: TensorValue, reason: str,
                stride: Sequence[int] | None = None) -> Stored: ...

    def reduction_buffer(self, node: torch.fx.Node, body: Reduction, size: Sequence[int],
                         reason: str) -> Stored: ...

    def make_reduction(self, node: torch.fx.Node, inner_fn: Callable[..., Any],
                       ranges: Sequence[int], reduction_ranges: Sequence[int],
                       reduction_type: str, dtype: torch.dtype, src_dtype: torch.dtype,
                       inputs: Sequence[Any] = ()) -> Reduction: ...

    def allocate(self, node: torch.fx.Node, reason: str, meta: Any = None) -> Any: ...

    def extern(self, node: torch.fx.Node, op: Any, args: Any, kwargs: dict[str, Any],
               fallback: bool, reason: str = "", out_stride: Sequence[int] | None = None,
               out_size: Sequence[int] | None = None) -> Any: ...


def row_pair(idx: Sequence[Any], n: int, dim: int) -> tuple[list[Any], list[Any], Any]:
    """An index over [*size, row] (a position p of `n` dims, then j along dim's row, as
    sorts and scans compare a row's elements pairwise): p, p with dim set to j, and j."""
    p, j = list(idx[:n]), idx[n]
    q = list(p)
    q[dim] = j
    return p, q, j


def compared(g: LoweringContext, x: TensorValue) -> TensorValue:
    """x stored once, for a lowering that compares its elements with each other (a rank,
    a running max's index): every comparison then sees the bits eager's op would. Inlined,
    or recomputed in the comparing kernel, an element is evaluated once per reader, in a
    vector lane or a scalar loop, and two evaluations of exp of one value can differ in
    the last bit: an element then sorts before itself, and a rank goes missing."""
    stored = g.realize(x, "compared element by element: stored once") \
        if isinstance(x, Lazy) else x
    buf = getattr(stored, "buffer", None)
    if isinstance(buf, ComputedBuffer):
        buf.compared = True
    return stored


def dense_permutation(size: Sequence[int], stride: Sequence[int]) -> bool:
    """True if `stride` lays `size` out densely in some dim order (no gaps, no overlap)."""
    dims = sorted((st, sz) for sz, st in zip(size, stride) if sz != 1)
    expected = 1
    for st, sz in dims:
        if st != expected:
            return False
        expected *= sz
    return True
