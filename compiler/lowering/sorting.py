"""Sorting as dense ranks: sort, topk, kthvalue, median, nanmedian.

An element's place in the sorted row is its rank: how many elements of the row come
before it (smaller, or equal and earlier: a stable order; NaNs last ascending and first
descending, as eager's). Rank is a reduction over the row; the r-th sorted element is
then the one element whose rank is r, found by a second reduction, and read through an
indirect load. Ties keep their input order: that is `stable=True`'s order, and one of
the orders `stable=False`, topk and kthvalue allow. It costs n x n per row, so rows
whose dense form exceeds the dense limit go to ATen with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
import torch
from torch.fx import Node

from kernelscope.compiler.ir.indexing import decompose
from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops
from kernelscope.compiler.lowering.common import LoweringContext, compared, out_meta, row_pair
from kernelscope.compiler.lowering.pointwise import cast
from kernelscope.compiler.lowering.reductions import reduce
from kernelscope.compiler.lowering.registry import aten, register_lowering
from kernelscope.compiler.lowering.scatter import I64, too_costly
from kernelscope.compiler.lowering.views import remap


def _before(x: TensorValue, dim: int, descending: bool) -> Callable[[Index], Any]:
    """[*size, n] -> 1 where row element j sorts before element i (at dim), else 0."""
    n = len(x.size)
    lx = x.loader()
    floating = x.dtype.is_floating_point

    def inner(idx: Index) -> Any:
        p, q, j = row_pair(idx, n, dim)
        xi, xj = lx(p), lx(q)
        earlier = ops.lt(ops.index_expr(j, I64), ops.index_expr(p[dim], I64))
        strictly = ops.gt(xj, xi) if descending else ops.lt(xj, xi)
        tie = ops.logical_and(ops.eq(xj, xi), earlier)
        if floating:
            ni, nj = ops.isnan(xi), ops.isnan(xj)
            nan_first = ops.logical_and(nj, ops.logical_not(ni)) if descending else \
                ops.logical_and(ni, ops.logical_not(nj))
            tie = ops.logical_or(tie, ops.logical_and(ops.logical_and(ni, nj), earlier))
            strictly = ops.logical_or(strictly, nan_first)
        return ops.to_dtype(ops.logical_or(strictly, tie), I64)

    return inner


def rank(g: LoweringContext, node: Node, x: TensorValue, dim: int, descending: bool) -> Any:
    size = list(x.size)
    lazy = g.lazy(node, _before(x, dim, descending), size + [size[dim]], I64, [x])
    return reduce(g, node, lazy, [len(size)], False, "sum", I64, I64)


def _at_rank(g: LoweringContext, node: Node, x: TensorValue, ranks: Any, dim: int, count: int,
             first: Callable[[Index], Any]) -> tuple[Any, Any]:
    """(values, indices) of the elements of rank first(p) + r, r < count, along dim."""
    n = len(x.size)
    size = list(x.size)
    out = list(size)
    out[dim] = count
    lr, lx = ranks.loader(), x.loader()

    def pick(idx: Index) -> Any:
        p, q, i = row_pair(idx, n, dim)
        want = ops.add(first(p), ops.index_expr(p[dim], I64))
        return ops.where(ops.eq(lr(q), want), ops.index_expr(i, I64), ops.constant(-1, I64))

    where = reduce(g, node, g.lazy(node, pick, out + [size[dim]], I64, [ranks]), [n], False,
                   "max", I64, I64)
    lw = where.loader()

    def value(p: Index) -> Any:
        q = list(p)
        q[dim] = ops.indirect_indexing(ops.maximum(lw(p), ops.constant(0, I64)), size[dim])
        return lx(q)

    return g.lazy(node, value, out, x.dtype, [x, where]), where


def _dim(x: TensorValue, dim: int) -> int:
    return dim % len(x.size) if x.size else 0


def _guard(g: LoweringContext, node: Node, x: TensorValue, dim: int, args: tuple[Any, ...],
           kwargs: dict[str, Any]) -> Any:
    """ATen for rows too long; a 0-d input sorts to itself (index 0)."""
    if not x.size:
        lx = x.loader()
        return (g.lazy(node, lambda p: lx([]), [], x.dtype, [x]),
                g.lazy(node, lambda p: ops.constant(0, I64), [], I64, []))
    return too_costly(g, node, x.numel(), x.size[dim], args, kwargs)


def _ties(g: LoweringContext, node: Node, x: TensorValue, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Any:
    """Integer and bool rows tie all the time, and where eager's order among ties is
    unspecified (topk, kthvalue, unstable sort) its choice of index is not reproducible
    (a partial sort): those go to ATen. Floats tie rarely; a tie gets the stable order."""
    if x.dtype.is_floating_point:
        return None
    return g.extern(node, node.target, args, kwargs, fallback=True,
                    reason="integer ties: eager's index among equal values is unspecified")


def _zero(p: Index) -> Any:
    return ops.constant(0, I64)


@register_lowering(aten.sort.default, aten.sort.stable)
def sort(g: LoweringContext, node: Node, x: TensorValue, *args: Any, **kwargs: Any) -> Any:
    stable_overload = node.target is aten.sort.stable
    if stable_overload:
        dim, descending = kwargs.get("dim", -1), kwargs.get("descending", False)
    else:
        dim = args[0] if args else kwargs.get("dim", -1)
        descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    d = _dim(x, dim)
    stable = stable_overload and kwargs.get("stable")
    big = _guard(g, node, x, d, (x, *args), kwargs)
    if big is None and not stable:
        big = _ties(g, node, x, (x, *args), kwargs)
    if big is not None:
        return big
    x = compared(g, x)
    return _at_rank(g, node, x, rank(g, node, x, d, descending), d, x.size[d], _zero)


@register_lowering(aten.topk)
def topk(g: LoweringContext, node: Node, x: TensorValue, k: int, dim: int = -1,
         largest: bool = True, sorted: bool = True) -> Any:
    d = _dim(x, dim)
    big = _guard(g, node, x, d, (x, k, dim, largest, sorted), {}) or \
        _ties(g, node, x, (x, k, dim, largest, sorted), {})
    if big is not None:
        return big
    x = compared(g, x)
    return _at_rank(g, node, x, rank(g, node, x, d, largest), d, k, _zero)


@register_lowering(aten.kthvalue)
def kthvalue(g: LoweringContext, node: Node, x: TensorValue, k: int, dim: int = -1,
             keepdim: bool = False) -> Any:
    d = _dim(x, dim)
    args = (x, k, dim, keepdim)
    big = _guard(g, node, x, d, args, {}) or _ties(g, node, x, args, {})
    if big is not None:
        return big
    x = compared(g, x)
    values, indices = _at_rank(g, node, x, rank(g, node, x, d, False), d, 1,
                               lambda p: ops.constant(k - 1, I64))
    return _squeeze(g, node, values, indices, d, keepdim)


def _squeeze(g: LoweringContext, node: Node, values: Any, indices: Any, d: int, keepdim: bool
            ) -> tuple[Any, Any]:
    if keepdim:
        return values, indices
    size = [s for k, s in enumerate(values.size) if k != d]

    def back(idx: Index) -> list[Any]:
        out = list(idx)
        out.insert(d, sympy.Integer(0))
        return out

    return remap(g, node, values, size, back), remap(g, node, indices, size, back)


def _median(g: LoweringContext, node: Node, x: TensorValue, d: int, keepdim: bool, skip_nan: bool
           ) -> tuple[Any, Any]:
    """The lower median of each row: rank (m - 1) // 2, m the row's length (nanmedian: its
    non-NaN count). median: a NaN in the row gives NaN and the first NaN's index."""
    floating = x.dtype.is_floating_point
    x = compared(g, x)
    ranks = rank(g, node, x, d, False)
    lx = x.loader()
    if floating:
        nan_int = g.lazy(node, lambda p: ops.to_dtype(ops.isnan(lx(p)), I64), x.size, I64, [x])
        nans = reduce(g, node, nan_int, [d], True, "sum", I64, I64)
        ln = nans.loader()
    row = x.size[d]

    def first(p: Index) -> Any:
        m = ops.constant(row, I64)
        if floating and skip_nan:
            m = ops.sub(m, ln(p))
        half = ops.floordiv(ops.sub(m, ops.constant(1, I64)), ops.constant(2, I64))
        return ops.maximum(half, ops.constant(0, I64))

    values, indices = _at_rank(g, node, x, ranks, d, 1, first)
    if floating and not skip_nan:
        is_nan = g.lazy(node, lambda p: ops.to_dtype(ops.isnan(lx(p)), torch.int8),
                        x.size, torch.int8, [x])
        first_nan = reduce(g, node, is_nan, [d], True, "argmax", I64, torch.int8)
        lv, li, lf = values.loader(), indices.loader(), first_nan.loader()

        def has(p: Index) -> Any:
            return ops.gt(ln(p), ops.constant(0, I64))

        values = g.lazy(node, lambda p: ops.where(has(p), ops.constant(float("nan"), x.dtype),
                                            lv(p)), values.size, x.dtype, [values, nans])
        indices = g.lazy(node, lambda p: ops.where(has(p), lf(p), li(p)), indices.size, I64,
                         [indices, nans, first_nan])
    return _squeeze(g, node, values, indices, d, keepdim)


@register_lowering(aten.median.dim, aten.nanmedian.dim)
def median_dim(g: LoweringContext, node: Node, x: TensorValue, dim: int = 0, keepdim: bool = False
              ) -> Any:
    d = _dim(x, dim)
    big = _guard(g, node, x, d, (x, dim, keepdim), {})
    if big is not None:
        return big
    return _median(g, node, x, d, keepdim, node.target is aten.nanmedian.dim)


@register_lowering(aten.median.default, aten.nanmedian.default)
def median_all(g: LoweringContext, node: Node, x: TensorValue) -> Any:
    if not x.size:
        return _guard(g, node, x, 0, (x,), {})[0]
    numel = x.numel()
    flat = remap(g, node, x, [numel], lambda idx: decompose(idx[0], list(x.size)))
    big = too_costly(g, node, numel, numel, (x,), {})
    if big is not None:
        return big
    values, _ = _median(g, node, flat, 0, False, node.target is aten.nanmedian.default)
    return values


@register_lowering(aten.searchsorted.Tensor, aten.searchsorted.Scalar)
def searchsorted(g: LoweringContext, node: Node, seq: TensorValue, values: Any, *,
                 out_int32: bool = False, right: bool = False, side: str | None = None,
                 sorter: Any = None) -> Any:
    """The insertion point of each value: how many boundaries come before it, a count
    over the row (left: !(b >= v), right: !(b > v), the predicates of eager's binary
    search, so NaN values land at the end)."""
    args = (seq, values)
    kwargs = {"out_int32": out_int32, "right": right, "side": side, "sorter": sorter}
    meta = out_meta(node)
    size = list(meta.shape)
    row = seq.size[-1] if seq.size else 1
    if sorter is not None:
        return g.extern(node, node.target, args, kwargs, fallback=True, reason="sorter")
    big = too_costly(g, node, max(1, meta.numel()), row, args, kwargs)
    if big is not None:
        return big
    upper = right or side == "right"
    seq = compared(g, seq)
    if isinstance(values, TensorValue):
        values = compared(g, values)
    ls = seq.loader()
    lv = values.loader() if isinstance(values, TensorValue) else None
    n = len(size)
    cd = torch.promote_types(seq.dtype, values.dtype if lv is not None else seq.dtype)

    def before(idx: Index) -> Any:
        p, j = idx[:n], idx[n]
        b = ls(list(p[:len(seq.size) - 1]) + [j]) if seq.size else ls([])
        v = lv(list(p)) if lv is not None else ops.constant(values, cd)
        b = cast(b, seq.dtype, cd)
        if lv is not None and values.dtype != cd:
            v = ops.to_dtype(v, cd)
        keep = ops.gt(b, v) if upper else ops.ge(b, v)
        return ops.to_dtype(ops.logical_not(keep), I64)

    count = reduce(g, node, g.lazy(node, before, size + [row], I64, [t for t in (seq, values)
                                                         if isinstance(t, TensorValue)]),
                   [n], False, "sum", I64, I64)
    if meta.dtype == I64:
        return count
    lc = count.loader()
    return g.lazy(node, lambda p: ops.to_dtype(lc(p), meta.dtype), size, meta.dtype, [count])
