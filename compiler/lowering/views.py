"""View lowerings: index remaps, never copies.

A view of a stored buffer is another strided view of the same storage (`Stored`), so
the wrapper can hand it to ATen as is. A view of a lazy value composes index functions:
the consumer's index is mapped back to the producer's before its inner_fn runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy

from compiler.ir.indexing import contiguous_strides, decompose
from compiler.ir.nodes import Index, Lazy, Stored, TensorValue
from compiler.lowering.registry import aten, prims, register_lowering


def remap(g: Any, x: TensorValue, size: Sequence[int],
          reindex: Callable[[Index], list[sympy.Expr]]) -> Lazy:
    load = x.loader()
    return g.lazy(lambda idx: load(reindex(idx)), size, x.dtype, [x])


def _norm_dim(dim: int, ndim: int) -> int:
    return dim + ndim if dim < 0 else dim


def _meta_size(g: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in g.out_meta().shape)


@register_lowering(aten.view, aten.reshape, aten._unsafe_view, aten.view_copy,
                   prims.reshape, aten._reshape_alias)
def view(g: Any, x: TensorValue, *args: Any) -> TensorValue:
    size = _meta_size(g)
    if size == tuple(x.size):
        return x
    if isinstance(x, Stored):
        view_ = x.view
        if list(view_.stride) == contiguous_strides(view_.size):
            return x.with_view(size, contiguous_strides(size), view_.offset)
    old_size = list(x.size)
    new_strides = contiguous_strides(size)

    def reindex(idx: Index) -> list[sympy.Expr]:
        flat = sum((i * s for i, s in zip(idx, new_strides)), sympy.Integer(0))
        return decompose(flat, old_size)

    return remap(g, x, size, reindex)


@register_lowering(aten.permute, prims.transpose)
def permute(g: Any, x: TensorValue, dims: Sequence[int]) -> TensorValue:
    dims = [_norm_dim(d, len(x.size)) for d in dims]
    size = [x.size[d] for d in dims]
    if isinstance(x, Stored):
        return x.with_view(size, [x.view.stride[d] for d in dims], x.view.offset)
    inverse = [dims.index(k) for k in range(len(dims))]
    return remap(g, x, size, lambda idx: [idx[inverse[k]] for k in range(len(dims))])


@register_lowering(aten.expand, prims.broadcast_in_dim)
def expand(g: Any, x: TensorValue, *args: Any) -> TensorValue:
    size = _meta_size(g)
    if size == tuple(x.size):
        return x
    lead = len(size) - len(x.size)
    if isinstance(x, Stored):
        stride = [0] * lead + [0 if x.size[k] == 1 and size[lead + k] != 1 else x.view.stride[k]
                               for k in range(len(x.size))]
        return x.with_view(size, stride, x.view.offset)
    xs = x.size
    return remap(g, x, size, lambda idx: [
        sympy.Integer(0) if xs[k] == 1 else idx[lead + k] for k in range(len(xs))])


@register_lowering(aten.squeeze, prims.squeeze)
def squeeze(g: Any, x: TensorValue, *args: Any) -> TensorValue:
    return view(g, x)


@register_lowering(aten.unsqueeze)
def unsqueeze(g: Any, x: TensorValue, dim: int) -> TensorValue:
    return view(g, x)


@register_lowering(aten.slice.Tensor)
def slice_(g: Any, x: TensorValue, dim: int = 0, start: int | None = None,
           end: int | None = None, step: int = 1) -> TensorValue:
    dim = _norm_dim(dim, len(x.size))
    n = x.size[dim]
    start = 0 if start is None else (start + n if start < 0 else min(start, n))
    size = _meta_size(g)
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

    return remap(g, x, size, reindex)


@register_lowering(aten.select.int)
def select(g: Any, x: TensorValue, dim: int, index: int) -> TensorValue:
    dim = _norm_dim(dim, len(x.size))
    index = index + x.size[dim] if index < 0 else index
    size = _meta_size(g)
    if isinstance(x, Stored):
        stride = list(x.view.stride)
        offset = x.view.offset + index * stride[dim]
        del stride[dim]
        return x.with_view(size, stride, offset)
    return remap(g, x, size, lambda idx: list(idx[:dim]) + [sympy.Integer(index)]
                 + list(idx[dim:]))


@register_lowering(aten.as_strided, prims.as_strided)
def as_strided(g: Any, x: TensorValue, size: Sequence[int], stride: Sequence[int],
               storage_offset: int | None = None) -> TensorValue:
    stored = g.realize(x, "as_strided needs storage")
    base = stored.view.offset if storage_offset is None else int(storage_offset)
    return stored.with_view([int(s) for s in size], [int(s) for s in stride], base)


@register_lowering(aten.unfold)
def unfold(g: Any, x: TensorValue, dim: int, size: int, step: int) -> TensorValue:
    dim = _norm_dim(dim, len(x.size))
    out = _meta_size(g)

    def reindex(idx: Index) -> list[sympy.Expr]:
        res = list(idx[:-1])
        res[dim] = idx[dim] * step + idx[-1]
        return res

    return remap(g, x, out, reindex)

