"""View lowerings: index remaps, never copies.

A view of a stored buffer is another strided view of the same storage (`Stored`), so
the wrapper can hand it to ATen as is. A view of a lazy value composes index functions:
the consumer's index is mapped back to the producer's before its inner_fn runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
from torch.fx import Node

from kernelscope.compiler.ir.indexing import (
    ModularIndexing,
    contiguous_strides,
    decompose,
    strided_index,
)
from kernelscope.compiler.ir.nodes import Index, InputBuffer, Lazy, Stored, TensorValue
from kernelscope.compiler.lowering.common import (
    LoweringContext,
    Unsupported,
    dense_permutation,
    out_meta,
)
from kernelscope.compiler.lowering.registry import aten, prims, register_lowering


def remap(g: LoweringContext, node: Node, x: TensorValue, size: Sequence[int],
          reindex: Callable[[Index], list[sympy.Expr]]) -> Lazy:
    load = x.loader()
    return g.lazy(node, lambda idx: load(reindex(idx)), size, x.dtype, [x])


def _norm_dim(dim: int, ndim: int) -> int:
    return dim + ndim if dim < 0 else dim


def _meta_size(node: Node) -> tuple[int, ...]:
    return tuple(int(s) for s in out_meta(node).shape)


@register_lowering(aten.view, aten.reshape, aten._unsafe_view, aten.view_copy,
                   prims.reshape, aten._reshape_alias)
def view(g: LoweringContext, node: Node, x: TensorValue, *args: Any) -> TensorValue:
    meta = out_meta(node)
    if meta.dtype != x.dtype:  # view(dtype): reinterpret the bits, which ATen does right
        return g.extern(node, node.target, (x, *args), {}, fallback=True,
                        reason="dtype view (bit reinterpretation)")
    size = _meta_size(node)
    if size == tuple(x.size):
        return x
    if isinstance(x, Stored):
        view_ = x.view
        if list(view_.stride) == contiguous_strides(view_.size):
            return x.with_view(size, contiguous_strides(size), view_.offset)
    old_size = list(x.size)
    new_strides = contiguous_strides(size)

    def reindex(idx: Index) -> list[sympy.Expr]:
        flat = strided_index(idx, new_strides)  # one Add (memoized), not one per term
        return decompose(flat, old_size)

    return remap(g, node, x, size, reindex)


@register_lowering(aten.permute, prims.transpose)
def permute(g: LoweringContext, node: Node, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    dims = [_norm_dim(d, len(x.size)) for d in dims]
    size = [x.size[d] for d in dims]
    if isinstance(x, Stored):
        return x.with_view(size, [x.view.stride[d] for d in dims], x.view.offset)
    inverse = [dims.index(k) for k in range(len(dims))]
    return remap(g, node, x, size, lambda idx: [idx[inverse[k]] for k in range(len(dims))])


@register_lowering(aten.expand, prims.broadcast_in_dim)
def expand(g: LoweringContext, node: Node, x: TensorValue, *args: Any) -> TensorValue:
    size = _meta_size(node)
    if size == tuple(x.size):
        return x
    lead = len(size) - len(x.size)
    if isinstance(x, Stored):
        stride = [0] * lead + [0 if x.size[k] == 1 and size[lead + k] != 1 else x.view.stride[k]
                               for k in range(len(x.size))]
        return x.with_view(size, stride, x.view.offset)
    xs = x.size
    return remap(g, node, x, size, lambda idx: [
        sympy.Integer(0) if xs[k] == 1 else idx[lead + k] for k in range(len(xs))])


@register_lowering(aten.squeeze, prims.squeeze)
def squeeze(g: LoweringContext, node: Node, x: TensorValue, *args: Any) -> TensorValue:
    return view(g, node, x)


@register_lowering(aten.unsqueeze)
def unsqueeze(g: LoweringContext, node: Node, x: TensorValue, dim: int) -> TensorValue:
    return view(g, node, x)


@register_lowering(aten.slice.Tensor)
def slice_(g: LoweringContext, node: Node, x: TensorValue, dim: int = 0, start: int | None = None,
           end: int | None = None, step: int = 1) -> TensorValue:
    dim = _norm_dim(dim, len(x.size))
    n = x.size[dim]
    start = 0 if start is None else (start + n if start < 0 else min(start, n))
    size = _meta_size(node)
    if size == tuple(x.size):
        return x
    if isinstance(x, Stored):
        stride = list(x.view.stride)
        offset = x.view.offset + start * stride[dim]
        stride[dim] *= step
        return x.with_view(size, stride, offset)

    def reindex(idx: Index) -> list[sympy.Expr]:
        out = list(idx)
        out[dim] = start + step * idx[dim]
        return out

    return remap(g, node, x, size, reindex)


@register_lowering(aten.select.int)
def select(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: int) -> TensorValue:
    dim = _norm_dim(dim, len(x.size))
    return _select(g, node, x, dim, index + x.size[dim] if index < 0 else index,
                   _meta_size(node))


def _select(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: int,
            size: Sequence[int]) -> TensorValue:
    if isinstance(x, Stored):
        stride = list(x.view.stride)
        offset = x.view.offset + index * stride[dim]
        del stride[dim]
        return x.with_view(size, stride, offset)
    return remap(g, node, x, size, lambda idx: list(idx[:dim]) + [sympy.Integer(index)]
                 + list(idx[dim:]))


@register_lowering(aten.as_strided, prims.as_strided)
def as_strided(g: LoweringContext, node: Node, x: TensorValue, size: Sequence[int],
               stride: Sequence[int], storage_offset: int | None = None) -> TensorValue:
    """A view of x's *storage*: only right where our storage is laid out as eager's.

    An input's storage is the real one. Anything else is first copied into a buffer with
    eager's strides for x, and the view must stay inside that copy (else: run eagerly).
    """
    size, stride = [int(s) for s in size], [int(s) for s in stride]
    src = node.args[0]
    assert isinstance(src, Node)
    meta = src.meta["val"]
    offset = int(meta.storage_offset()) if storage_offset is None else int(storage_offset)
    if isinstance(x, Stored) and isinstance(x.buffer, InputBuffer):
        return x.with_view(size, stride, offset - g.input_offsets.get(x.buffer.name, 0))
    mstride = [int(s) for s in meta.stride()]
    if not dense_permutation(list(x.size), mstride):
        raise Unsupported("as_strided of a non-dense intermediate")
    rel = offset - int(meta.storage_offset())
    hi = rel + sum((n - 1) * st for n, st in zip(size, stride) if n > 0)
    if any(n == 0 for n in size):
        hi = rel
    if rel < 0 or hi >= max(1, x.numel()) or any(st < 0 for st in stride):
        raise Unsupported("as_strided reaching outside its input's own elements")
    copy = g.realize(remap(g, node, x, x.size, lambda idx: list(idx)), "as_strided needs storage "
                     "laid out as eager's", stride=mstride)
    return copy.with_view(size, stride, rel)


@register_lowering(aten.unfold)
def unfold(g: LoweringContext, node: Node, x: TensorValue, dim: int, size: int, step: int
          ) -> TensorValue:
    dim = _norm_dim(dim, len(x.size))
    out = _meta_size(node)
    if not x.size:  # unfold of a 0-d tensor: one window of the one element
        return remap(g, node, x, out, lambda idx: [])

    def reindex(idx: Index) -> list[sympy.Expr]:
        res = list(idx[:-1])
        res[dim] = idx[dim] * step + idx[-1]
        return res

    return remap(g, node, x, out, reindex)


def _narrow(g: LoweringContext, node: Node, x: TensorValue, dim: int, start: int, length: int
            ) -> TensorValue:
    size = list(x.size)
    size[dim] = length
    if isinstance(x, Stored):
        return x.with_view(size, x.view.stride, x.view.offset + start * x.view.stride[dim])

    def reindex(idx: Index) -> list[sympy.Expr]:
        out = list(idx)
        out[dim] = idx[dim] + start
        return out

    return remap(g, node, x, size, reindex)


@register_lowering(aten.split_with_sizes, aten.split_with_sizes_copy)
def split_with_sizes(g: LoweringContext, node: Node, x: TensorValue, sizes: Sequence[int],
                     dim: int = 0) -> tuple[TensorValue, ...]:
    dim = _norm_dim(dim, len(x.size))
    out, start = [], 0
    for n in sizes:
        out.append(_narrow(g, node, x, dim, start, int(n)))
        start += int(n)
    return tuple(out)


@register_lowering(aten.split.Tensor, aten.split_copy.Tensor)
def split(g: LoweringContext, node: Node, x: TensorValue, split_size: int, dim: int = 0
         ) -> tuple[TensorValue, ...]:
    dim = _norm_dim(dim, len(x.size))
    n = x.size[dim]
    sizes = [min(split_size, n - s) for s in range(0, n, split_size)] if split_size else [n]
    return split_with_sizes(g, node, x, sizes or [0], dim)


@register_lowering(aten.unbind.int, aten.unbind_copy.int)
def unbind(g: LoweringContext, node: Node, x: TensorValue, dim: int = 0) -> tuple[TensorValue, ...]:
    dim = _norm_dim(dim, len(x.size))
    size = [s for k, s in enumerate(x.size) if k != dim]
    return tuple(_select(g, node, x, dim, i, size) for i in range(x.size[dim]))


@register_lowering(aten.repeat)
def repeat(g: LoweringContext, node: Node, x: TensorValue, repeats: Sequence[int]) -> TensorValue:
    """Tile x: output element i reads x at i modulo x's size, dim by dim (aligned right)."""
    size = _meta_size(node)
    lead = len(size) - len(x.size)
    xs = x.size
    return remap(g, node, x, size, lambda idx: [
        sympy.Integer(0) if xs[k] == 1 else ModularIndexing(idx[lead + k], 1, xs[k])
        if size[lead + k] != xs[k] else idx[lead + k] for k in range(len(xs))])


@register_lowering(aten.flip)
def flip(g: LoweringContext, node: Node, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    nd = len(x.size)
    flipped = {_norm_dim(d, nd) for d in dims}
    size = list(x.size)
    return remap(g, node, x, size, lambda idx: [size[k] - 1 - i if k in flipped else i
                                          for k, i in enumerate(idx)])


@register_lowering(aten.diagonal, aten.diagonal_copy)
def diagonal(g: LoweringContext, node: Node, x: TensorValue, offset: int = 0, dim1: int = 0,
             dim2: int = 1) -> TensorValue:
    nd = len(x.size)
    d1, d2 = _norm_dim(dim1, nd), _norm_dim(dim2, nd)
    size = _meta_size(node)
    rest = [k for k in range(nd) if k not in (d1, d2)]
    start1, start2 = (0, offset) if offset >= 0 else (-offset, 0)
    if isinstance(x, Stored):
        st = x.view.stride
        n = size[-1]
        base = x.view.offset + (start1 * st[d1] + start2 * st[d2] if n > 0 else 0)
        return x.with_view(size, [st[k] for k in rest] + [st[d1] + st[d2]], base)

    def reindex(idx: Index) -> list[sympy.Expr]:
        out: list[sympy.Expr] = [sympy.Integer(0)] * nd
        for k, i in zip(rest, idx[:-1]):
            out[k] = i
        out[d1] = idx[-1] + start1
        out[d2] = idx[-1] + start2
        return out

    return remap(g, node, x, size, reindex)
