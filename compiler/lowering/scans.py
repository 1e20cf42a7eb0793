"""Scans (cumsum, cumprod, logcumsumexp, cummax, cummin) as masked reductions.

There is no scan loop in the IR. Element i of a scan along `dim` is a reduction over the
prefix j <= i, so the scan becomes a reduction over a second copy of the scanned dim with
the suffix masked to the identity (the decomposition PyTorch's own reference uses for
cumsum): every backend already generates that, the Triton interpreter included. It
costs n x n per row, so it is used while (elements x scan length) is at most the dense
limit; longer scans go to ATen, and the reason says so.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import Node

from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops, reduction_identity
from kernelscope.compiler.lowering.common import LoweringContext, compared, out_meta, row_pair
from kernelscope.compiler.lowering.pointwise import cast, upcast
from kernelscope.compiler.lowering.reductions import _nan_aware, reduce
from kernelscope.compiler.lowering.registry import aten, register_lowering
from kernelscope.compiler.lowering.scatter import I64, too_costly


def _prefix(g: LoweringContext, node: Node, x: TensorValue, dim: int, cd: torch.dtype,
            rtype: str) -> Any:
    """A lazy [*x.size, n]: x[.., j, ..] at [.., i, .., j] for j <= i, else the identity."""
    n = len(x.size)
    lx = x.loader()
    other = reduction_identity(rtype, cd)

    def inner(idx: Index) -> Any:
        p, src, j = row_pair(idx, n, dim)
        keep = ops.le(ops.index_expr(j, I64), ops.index_expr(p[dim], I64))
        v = cast(lx(src), x.dtype, cd)
        return ops.where(keep, v, ops.constant(other, cd))

    return g.lazy(node, inner, list(x.size) + [x.size[dim]], cd, [x])


def _early(g: LoweringContext, node: Node, x: TensorValue, dim: int) -> tuple[Any, int]:
    """(a result needing no scan, else None; the normalized dim): ATen for a scan too long
    for its dense form, the element itself for a 0-d input."""
    if not x.size:
        out = out_meta(node)
        out = out[0] if isinstance(out, (tuple, list)) else out
        lx = x.loader()

        def inner(idx: Index) -> Any:
            return cast(lx([]), x.dtype, out.dtype)

        return g.lazy(node, inner, [], out.dtype, [x]), -1
    dim = dim % len(x.size)
    return too_costly(g, node, x.numel(), x.size[dim], (x, dim), {}), dim


def _scan(g: LoweringContext, node: Node, x: TensorValue, dim: int, rtype: str) -> Any:
    early, dim = _early(g, node, x, dim)
    if early is not None:
        return early
    out = out_meta(node).dtype
    cd = upcast(out)
    prefix = _prefix(g, node, x, dim, cd, rtype)
    return reduce(g, node, prefix, [len(x.size)], False, rtype, out, cd)


@register_lowering(aten.cumsum)
def cumsum(g: LoweringContext, node: Node, x: TensorValue, dim: int, *, dtype: Any = None) -> Any:
    return _scan(g, node, x, dim, "sum")


@register_lowering(aten.cumprod)
def cumprod(g: LoweringContext, node: Node, x: TensorValue, dim: int, *, dtype: Any = None) -> Any:
    return _scan(g, node, x, dim, "prod")


@register_lowering(aten.logcumsumexp)
def logcumsumexp(g: LoweringContext, node: Node, x: TensorValue, dim: int) -> Any:
    """log(sum_{j<=i} exp(x_j - m_i)) + m_i with m_i the prefix max (0 where it is
    infinite, so all -inf gives -inf and a +inf gives +inf, as eager)."""
    early, dim = _early(g, node, x, dim)
    if early is not None:
        return early
    out = out_meta(node).dtype
    cd = upcast(out)
    n = len(x.size)
    best = reduce(g, node, _prefix(g, node, x, dim, cd, "max"), [n], False, "max", cd, cd)
    lb, lx = best.loader(), x.loader()

    def shift(m: Any) -> Any:
        finite = ops.logical_not(ops.logical_or(ops.isinf(m), ops.isnan(m)))
        return ops.where(finite, m, ops.constant(0.0, cd))

    def terms(idx: Index) -> Any:
        p, src, j = row_pair(idx, n, dim)
        v = cast(lx(src), x.dtype, cd)
        keep = ops.le(ops.index_expr(j, I64), ops.index_expr(p[dim], I64))
        return ops.where(keep, ops.exp(ops.sub(v, shift(lb(p)))), ops.constant(0.0, cd))

    total = reduce(g, node, g.lazy(node, terms, list(x.size) + [x.size[dim]], cd, [x, best]), [n],
                   False, "sum", cd, cd)
    lt = total.loader()

    def inner(idx: Index) -> Any:
        return cast(ops.add(ops.log(lt(idx)), shift(lb(idx))), cd, out)

    return g.lazy(node, inner, x.size, out, [total, best])


def _cum_extreme(g: LoweringContext, node: Node, x: TensorValue, dim: int, rtype: str) -> Any:
    """(values, indices) of cummax/cummin as eager: ties and NaNs take the last index."""
    if x.dtype == torch.bool:
        return g.extern(node, node.target, (x, dim), {}, fallback=True,
                        reason="running max/min of bool values")
    early, dim = _early(g, node, x, dim)
    if early is not None:
        if dim >= 0:
            return early
        return early, g.lazy(node, lambda idx: ops.constant(0, I64), [], I64, [])
    n = len(x.size)
    x = compared(g, x)
    prefix = _prefix(g, node, x, dim, x.dtype, rtype)
    values = _nan_aware(g, node, prefix, [n], False, rtype, x.dtype)
    lv, lx = values.loader(), x.loader()
    floating = x.dtype.is_floating_point

    def last(idx: Index) -> Any:
        p, src, j = row_pair(idx, n, dim)
        v, best = lx(src), lv(p)
        hit = ops.eq(v, best)
        if floating:
            hit = ops.where(ops.isnan(best), ops.isnan(v), hit)
        jv = ops.index_expr(j, I64)
        keep = ops.logical_and(ops.le(jv, ops.index_expr(p[dim], I64)), hit)
        return ops.where(keep, jv, ops.constant(-1, I64))

    cand = g.lazy(node, last, list(x.size) + [x.size[dim]], I64, [x, values])
    return values, reduce(g, node, cand, [n], False, "max", I64, I64)


@register_lowering(aten.cummax)
def cummax(g: LoweringContext, node: Node, x: TensorValue, dim: int) -> Any:
    return _cum_extreme(g, node, x, dim, "max")


@register_lowering(aten.cummin)
def cummin(g: LoweringContext, node: Node, x: TensorValue, dim: int) -> Any:
    return _cum_extreme(g, node, x, dim, "min")
