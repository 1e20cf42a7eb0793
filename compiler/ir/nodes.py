"""IR nodes: layouts, buffers and the two loop bodies, Pointwise and Reduction.

Lowering builds these; the scheduler groups them; codegen reads their `inner_fn` through
an ops handler. A buffer is something the wrapper allocates (or receives); a loop body
says how to compute every element of it:

    Pointwise.inner_fn(index)          -> value of element `index`
    Reduction.inner_fn(index, rindex)  -> value to combine over all `rindex`

Values flowing through lowering are `TensorValue`s: either `Lazy` (a Pointwise not yet
stored anywhere: consumers inline its inner_fn) or `Stored` (a buffer seen through a
strided view: size, stride, offset; views cost nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kernelscope.compiler.ir.indexing import contiguous_strides, strided_index
from kernelscope.compiler.ir.ops import ops

Index = Sequence[sympy.Expr]


@dataclass(frozen=True)
class Layout:
    device: str
    dtype: torch.dtype
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def contiguous(device: str, dtype: torch.dtype, size: Sequence[int]) -> Layout:
        size = tuple(int(s) for s in size)
        return Layout(device, dtype, size, tuple(contiguous_strides(size)))

    def numel(self) -> int:
        return math.prod(self.size)

    def storage_numel(self) -> int:
        """Elements the underlying storage must hold for this view."""
        if any(s == 0 for s in self.size):
            return 0
        return self.offset + 1 + sum((s - 1) * st for s, st in zip(self.size, self.stride))

    def nbytes(self) -> int:
        return self.storage_numel() * _itemsize(self.dtype)

    def index(self, idx: Index) -> sympy.Expr:
        return strided_index(idx, self.stride, self.offset)


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


@dataclass
class Pointwise:
    device: str
    dtype: torch.dtype
    inner_fn: Callable[[Index], Any]
    ranges: tuple[int, ...]
    origins: frozenset[str] = frozenset()
    # What the body reads, once known (handlers.reads_of): the lowering event and the
    # scheduler both ask, and a body never changes once made.
    reads_memo: list[Any] | None = field(default=None, init=False, repr=False, compare=False)

    def numel(self) -> int:
        return math.prod(map(int, self.ranges))


@dataclass
class Reduction:
    device: str
    dtype: torch.dtype
    inner_fn: Callable[[Index, Index], Any]
    ranges: tuple[int, ...]
    reduction_ranges: tuple[int, ...]
    reduction_type: str
    src_dtype: torch.dtype
    origins: frozenset[str] = frozenset()
    reads_memo: list[Any] | None = field(default=None, init=False, repr=False, compare=False)

    def numel(self) -> int:
        return math.prod(map(int, self.ranges))

    def rnumel(self) -> int:
        return math.prod(map(int, self.reduction_ranges))


@dataclass
class Buffer:
    """Anything with a name and a layout that the wrapper holds a tensor for."""

    name: str
    layout: Layout
    origins: frozenset[str] = frozenset()

    kind = "buffer"

    @property
    def dtype(self) -> torch.dtype:
        return self.layout.dtype

    @property
    def device(self) -> str:
        return self.layout.device


@dataclass
class InputBuffer(Buffer):
    kind = "input"


@dataclass
class ComputedBuffer(Buffer):
    data: Pointwise | Reduction | None = None
    realized: str = ""  # why this value was materialized (shown in the UI)
    # Its readers compare its elements with each other (sort, topk, cummax): they load it,
    # never recompute it in their own kernel, where a vector lane's exp can round otherwise
    # than the scalar one that stored it (schedule/fusion.py keeps them apart).
    compared: bool = False

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "reduction" if isinstance(self.data, Reduction) else "pointwise"


@dataclass
class ExternKernel(Buffer):
    """An ATen call we do not lower: the wrapper calls `op` on realized tensors.

    `args` is the op's arguments with tensors replaced by `TensorArg` (a buffer name seen
    through a strided view). Multi-output ops have `outputs`: one ExternOutput each.
    """

    op: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    fallback: bool = True  # False where extern is the plan (mm, conv), True if unlowered
    kind = "extern"

    @property
    def allocates_result(self) -> bool:
        """ATen allocates what it returns (a template kernel writes the wrapper's buffer)."""
        return True


# ATen's attention kernels, forward and backward. They read an input's last dim as
# contiguous whatever its strides (lowering/extern_layout.py copies such an input) and lay
# their results out like their inputs (codegen/wrapper.py conforms them at run time).
ATTENTION_OPS = frozenset(getattr(torch.ops.aten, f"_scaled_dot_product_{k}{end}")
                          for k in ("flash_attention_for_cpu", "flash_attention",
                                    "efficient_attention", "cudnn_attention")
                          for end in ("", "_backward"))


@dataclass
class ExternOutput(Buffer):
    """One tensor of a multi-output extern call (`buf5 = buf4[1]`)."""

    parent: str = ""
    item: int = 0
    kind = "extern_output"
    allocates_result = True


@dataclass(frozen=True)
class OpaqueArg:
    """A graph input that is an opaque object (a process group a DTensor's backward needs):
    passed through by name, never looked into."""

    name: str


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument of an extern call: `name` through a strided view."""

    name: str
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    base_size: tuple[int, ...]
    base_stride: tuple[int, ...]

    def is_plain(self) -> bool:
        return (
            self.size == self.base_size and self.stride == self.base_stride and self.offset == 0
        )


# -- values in lowering -----------------------------------------------------------------


class TensorValue:
    size: tuple[int, ...]
    dtype: torch.dtype
    device: str
    origins: frozenset[str]

    def loader(self) -> Callable[[Index], Any]:
        raise NotImplementedError

    def numel(self) -> int:
        return math.prod(map(int, self.size))


@dataclass
class Lazy(TensorValue):
    """An unrealized Pointwise: consumers inline its inner_fn."""

    node: Pointwise

    @property
    def size(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.node.ranges

    @property
    def dtype(self) -> torch.dtype:  # type: ignore[override]
        return self.node.dtype

    @property
    def device(self) -> str:  # type: ignore[override]
        return self.node.device

    @property
    def origins(self) -> frozenset[str]:  # type: ignore[override]
        return self.node.origins

    def loader(self) -> Callable[[Index], Any]:
        return self.node.inner_fn


@dataclass
class Stored(TensorValue):
    """A buffer seen through a strided view (size, stride, offset) of its storage."""

    buffer: Buffer
    view: Layout

    @property
    def size(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.view.size

    @property
    def dtype(self) -> torch.dtype:  # type: ignore[override]
        return self.view.dtype

    @property
    def device(self) -> str:  # type: ignore[override]
        return self.view.device

    @property
    def origins(self) -> frozenset[str]:  # type: ignore[override]
        return frozenset()

    def loader(self) -> Callable[[Index], Any]:
        name, view = self.buffer.name, self.view

        def load(index: Index) -> Any:
            return ops.load(name, view.index(index))

        return load

    def as_arg(self) -> TensorArg:
        base = self.buffer.layout
        return TensorArg(
            self.buffer.name, self.view.size, self.view.stride, self.view.offset,
            base.size, base.stride,
        )

    def with_view(self, size: Sequence[int], stride: Sequence[int], offset: int) -> Stored:
        lay = Layout(self.view.device, self.view.dtype, tuple(size), tuple(stride), offset)
        return Stored(self.buffer, lay)
