"""Scatter-like ops as dense gathers: index_put, scatter, scatter_add, scatter_reduce,
diagonal_scatter, as_strided_scatter.

There is no indirect store in the IR. Instead every output element asks which source
elements land on it: `out[p]` reduces, over all candidate sources `j`, the sources whose
(wrapped) index equals `p`. That is a reduction over the candidates with a match mask:

    accumulate (index_put accumulate=True, scatter_add, sum/prod/amax/amin/mean):
        out[p] = combine(x[p], reduce_j where(match(j, p), src[j], identity))
    overwrite (index_put, scatter): the last matching source wins, as in eager's
    sequential CPU loop:  jlast = max_j where(match(j, p), j, -1)
        out[p] = where(jlast >= 0, src[jlast], x[p])

It costs (outputs x candidates) instead of (candidates), so it is used while that product
is at most DENSE_SCATTER_MAX; bigger ones go to ATen with the reason. No element is ever
read or written out of bounds: an index that matches no output is simply never picked,
and negative indices wrap as in eager.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
from torch.fx import Node

from kernelscope.compiler.ir.indexing import contiguous_strides, decompose
from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops, reduction_identity
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import broadcast_loader, cast, upcast
from kernelscope.compiler.lowering.reductions import reduce
from kernelscope.compiler.lowering.registry import aten, register_lowering

DENSE_SCATTER_MAX = 1 << 24  # outputs x candidate sources a dense scatter may cost
I64 = torch.int64


def _wrap(value: Any, size: int) -> Any:
    """An index value as int64, negative ones wrapped (eager's semantics)."""
    v = ops.to_dtype(value, I64)
    return ops.where(ops.lt(v, ops.constant(0, I64)), ops.add(v, ops.constant(size, I64)), v)


def _is(coord: Any, value: Any) -> Any:
    return ops.eq(ops.index_expr(coord, I64), value)


def too_costly(g: LoweringContext, node: Node, numel: int, candidates: int, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    """ATen (with the reason) where the dense form would cost too much, else None. The
    dense forms (scatters, scans, sorts) all use this one limit."""
    if numel * candidates <= DENSE_SCATTER_MAX:
        return None
    return g.extern(node, node.target, args, kwargs, fallback=True,
                    reason=f"dense form would cost {numel} outputs x {candidates} candidates "
                           f"(> {DENSE_SCATTER_MAX})")


def refused(g: LoweringContext, node: Node, x: TensorValue, numel: int, candidates: int, mode: str,
            args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """ATen (with the reason) for what the dense form does not do, else None: too costly,
    or combining bool values (eager's bool add is an or; not lowered)."""
    if x.dtype == torch.bool and mode != "last":
        return g.extern(node, node.target, args, kwargs, fallback=True,
                        reason=f"{mode} of bool values")
    return too_costly(g, node, numel, candidates, args, kwargs)


def _gathered(g: LoweringContext, node: Node, x: TensorValue, out: torch.dtype, candidates: int,
              match: Callable[[Index, Any], Any], source: Callable[[Index, Any], Any],
              mode: str, include_self: bool = True) -> Any:
    """out[p] from the candidates j = 0..candidates-1 with match(p, j) true.

    `source(p, j)` is candidate j's value (only evaluated where it matches); `mode` is
    "last" (the last match wins), or a reduction: sum, prod, amax, amin, mean."""
    size = list(x.size)
    cd = upcast(out)
    lx = x.loader()
    n = len(size)

    def self_value(p: Index) -> Any:
        return cast(lx(p), x.dtype, cd)

    def cand(body: Callable[[Index, Any], Any], dtype: torch.dtype) -> Any:
        return g.lazy(node, lambda idx: body(idx[:n], idx[n]), size + [candidates], dtype, [x])

    if mode == "last":
        def pick(p: Index, j: Any) -> Any:
            return ops.where(match(p, j), ops.index_expr(j, I64), ops.constant(-1, I64))

        last = reduce(g, node, cand(pick, I64), [n], False, "max", I64, I64)
        ll = last.loader()

        def overwrite(p: Index) -> Any:
            jl = ll(p)
            js = ops.indirect_indexing(ops.maximum(jl, ops.constant(0, I64)), candidates)
            hit = ops.ge(jl, ops.constant(0, I64))
            v = ops.where(hit, ops.masked(hit, lambda: source(p, js), 0), self_value(p))
            return cast(v, cd, out)

        return g.lazy(node, overwrite, size, out, [last])
    rtype = {"sum": "sum", "mean": "sum", "prod": "prod", "amax": "max", "amin": "min"}[mode]
    ident = reduction_identity(rtype, cd)

    def masked_src(p: Index, j: Any) -> Any:
        hit = match(p, j)
        return ops.where(hit, ops.masked(hit, lambda: source(p, j), ident),
                         ops.constant(ident, cd))

    def nan_src(p: Index, j: Any) -> Any:
        hit = match(p, j)
        return ops.logical_and(hit, ops.masked(hit, lambda: ops.isnan(source(p, j)), False))

    total = reduce(g, node, cand(masked_src, cd), [n], False, rtype, cd, cd)
    parts = [total]
    count = nan = None
    if mode == "mean" or not include_self:
        count = reduce(g, node, cand(lambda p, j: ops.to_dtype(match(p, j), I64), I64), [n],
                       False, "sum", I64, I64)
        parts.append(count)
    if rtype in ("max", "min") and cd.is_floating_point:
        nan = reduce(g, node, cand(nan_src, torch.bool), [n], False, "any", torch.bool, torch.bool)
        parts.append(nan)
    lt = total.loader()
    lc = count.loader() if count is not None else None
    ln = nan.loader() if nan is not None else None

    def inner(p: Index) -> Any:
        acc, xv = lt(p), self_value(p)
        if mode == "mean":
            c = lc(p)  # type: ignore[misc]
            if include_self:
                acc, c = ops.add(acc, xv), ops.add(c, ops.constant(1, I64))
            c = ops.maximum(c, ops.constant(1, I64))
            op = ops.truediv if cd.is_floating_point else ops.floordiv
            acc = op(acc, ops.to_dtype(c, cd))
        elif include_self:
            acc = {"sum": ops.add, "prod": ops.mul, "max": ops.maximum,
                   "min": ops.minimum}[rtype](xv, acc)
        if ln is not None:
            bad = ln(p) if not include_self else ops.logical_or(ln(p), ops.isnan(xv))
            acc = ops.where(bad, ops.constant(float("nan"), cd), acc)
        if lc is not None and not include_self:
            acc = ops.where(ops.gt(lc(p), ops.constant(0, I64)), acc, xv)
        return cast(acc, cd, out)

    return g.lazy(node, inner, size, out, parts)


# -- index_put -------------------------------------------------------------------------

@register_lowering(aten.index_put, aten._unsafe_index_put)
def index_put(g: LoweringContext, node: Node, x: TensorValue, indices: Sequence[Any], values: Any,
              accumulate: bool = False) -> Any:
    args = (x, indices, values, accumulate)
    positions = [k for k, t in enumerate(indices) if t is not None]
    tensors = [indices[k] for k in positions]
    why = ""
    if not positions or positions != list(range(positions[0], positions[-1] + 1)):
        why = "non-adjacent advanced indices"
    elif any(t.dtype in (torch.bool, torch.uint8) for t in tensors):
        why = "boolean mask indices (their count is data-dependent)"
    elif accumulate and x.dtype == torch.bool:
        why = "accumulate into bool"
    if why.startswith("boolean") and len(tensors) == 1 and \
            _same_for_every_hit(values, len(x.size) - positions[0] - len(tensors[0].size)):
        return _mask_put(g, node, x, tensors[0], positions[0], values, accumulate)
    if why:
        return g.extern(node, node.target, args, {}, fallback=True, reason=why)
    bshape = list(torch.broadcast_shapes(*[tuple(t.size) for t in tensors]))
    k = math.prod(bshape)
    big = too_costly(g, node, x.numel(), k, args, {})
    if big is not None:
        return big
    first, npos, nb = positions[0], len(positions), len(bshape)
    rshape = list(x.size[:first]) + bshape + list(x.size[first + npos:])
    cd = upcast(x.dtype)
    lv = broadcast_loader(values, rshape, cd)
    loaders = [t.loader() for t in tensors]

    def bcoords(j: Any) -> list[Any]:
        return decompose(j, bshape) if bshape else []

    def match(p: Index, j: Any) -> Any:
        bidx = bcoords(j)
        hit = None
        for t, load, pos in zip(tensors, loaders, positions):
            lead = nb - len(t.size)
            sub = [0 if t.size[q] == 1 else bidx[lead + q] for q in range(len(t.size))]
            eq = _is(p[pos], _wrap(load(sub), x.size[pos]))
            hit = eq if hit is None else ops.logical_and(hit, eq)
        return hit

    def source(p: Index, j: Any) -> Any:
        return lv(list(p[:first]) + bcoords(j) + list(p[first + npos:]))

    return _gathered(g, node, x, x.dtype, k, match, source, "sum" if accumulate else "last")


def _same_for_every_hit(values: Any, trailing: int) -> bool:
    """values broadcast to (number of hits, *trailing dims) without depending on the hit."""
    if not isinstance(values, TensorValue):
        return True
    k = len(values.size) - 1 - trailing
    return k < 0 or values.size[k] == 1


def _mask_put(g: LoweringContext, node: Node, x: TensorValue, mask: TensorValue, first: int,
              values: Any, accumulate: bool) -> Any:
    """x[..., mask, ...] = v (or += v) where v is the same for every hit: a where."""
    cd = upcast(x.dtype)
    lx, lm = x.loader(), mask.loader()
    m = len(mask.size)
    rshape = list(x.size[:first]) + [1] + list(x.size[first + m:])
    lv = broadcast_loader(values, rshape, cd)

    def inner(p: Index) -> Any:
        v = lv(list(p[:first]) + [sympy.Integer(0)] + list(p[first + m:]))
        xv = cast(lx(p), x.dtype, cd)
        hit = ops.ne(ops.to_dtype(lm(p[first:first + m]), I64), ops.constant(0, I64))
        return cast(ops.where(hit, ops.add(xv, v) if accumulate else v, xv), cd, x.dtype)

    return g.lazy(node, inner, x.size, x.dtype, [t for t in (x, mask, values)
                                          if isinstance(t, TensorValue)])


@register_lowering(aten.put)
def put(g: LoweringContext, node: Node, x: TensorValue, index: TensorValue, source: TensorValue,
        accumulate: bool = False) -> Any:
    """x.flatten()[index] = source.flatten() (or +=), in x's shape."""
    args = (x, index, source, accumulate)
    k, numel = index.numel(), x.numel()
    big = refused(g, node, x, numel, k, "sum" if accumulate else "last", args, {})
    if big is not None:
        return big
    li, ls = index.loader(), source.loader()
    cd = upcast(x.dtype)
    strides = contiguous_strides(x.size)

    def match(p: Index, j: Any) -> Any:
        flat = sum((i * s for i, s in zip(p, strides)), sympy.Integer(0))
        return _is(flat, _wrap(li(decompose(j, list(index.size))), numel))

    def source_at(p: Index, j: Any) -> Any:
        return cast(ls(decompose(j, list(source.size))), source.dtype, cd)

    return _gathered(g, node, x, x.dtype, k, match, source_at, "sum" if accumulate else "last")


@register_lowering(aten.index_reduce)
def index_reduce(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue,
                 src: TensorValue, reduce_: str, *, include_self: bool = True) -> Any:
    """out[..., p, ...] reduces x there with src[..., j, ...] for every j: index[j] == p."""
    args = (x, dim, index, src, reduce_)
    n = len(x.size)
    dim = dim % n if n else 0
    length = index.numel()
    big = refused(g, node, x, x.numel(), length, reduce_, args, {"include_self": include_self})
    if big is not None:
        return big
    li, ls = index.loader(), src.loader()
    cd = upcast(x.dtype)
    size = x.size[dim] if n else 1

    def match(p: Index, j: Any) -> Any:
        pd = p[dim] if n else sympy.Integer(0)
        return _is(pd, _wrap(li([j] if index.size else []), size))

    def source(p: Index, j: Any) -> Any:
        at = [j if q == dim else p[q] for q in range(n)] if src.size else []
        return cast(ls(at), src.dtype, cd)

    return _gathered(g, node, x, x.dtype, length, match, source, reduce_, include_self)


@register_lowering(aten.masked_scatter)
def masked_scatter(g: LoweringContext, node: Node, x: TensorValue, mask: TensorValue,
                   source: TensorValue) -> Any:
    """out[p] = source.flatten()[number of True in mask before p] where mask[p], else x:
    the count is a reduction over the flat positions up to p."""
    size = list(out_meta(node).shape)
    numel = math.prod(size)
    big = too_costly(g, node, numel, numel, (x, mask, source), {})
    if big is not None:
        return big
    lm = broadcast_loader(mask, size, torch.bool)
    cd = upcast(x.dtype)
    lx = broadcast_loader(x, size, cd)
    ls = source.loader()
    n = len(size)

    def before(idx: Index) -> Any:
        q, p = decompose(idx[n], size), idx[:n]
        flat_p = sum((i * s for i, s in zip(p, contiguous_strides(size))), sympy.Integer(0))
        upto = ops.le(ops.index_expr(idx[n], I64), ops.index_expr(flat_p, I64))
        return ops.to_dtype(ops.logical_and(upto, lm(q)), I64)

    count = reduce(g, node, g.lazy(node, before, size + [numel], I64, [mask]), [n], False,
                   "sum", I64, I64)
    lc = count.loader()

    def inner(p: Index) -> Any:
        hit = lm(p)

        def take() -> Any:
            pos = ops.sub(lc(p), ops.constant(1, I64))
            s = ops.indirect_indexing(ops.maximum(pos, ops.constant(0, I64)), source.numel())
            return cast(ls(decompose(s, list(source.size))), source.dtype, cd)

        return cast(ops.where(hit, ops.masked(hit, take, 0), lx(p)), cd, x.dtype)

    return g.lazy(node, inner, size, x.dtype, [x, mask, source, count])


# -- scatter, scatter_add, scatter_reduce ----------------------------------------------

def _scatter(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue, src: Any,
             mode: str, include_self: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    n = len(x.size)
    dim = dim + n if dim < 0 and n else dim
    if n == 0 or not index.size:  # 0-d: index and src are scalars along "dim 0"
        xs, isz = [1], [1]
    else:
        xs, isz = list(x.size), list(index.size)
    length = isz[dim]
    big = refused(g, node, x, x.numel(), length, mode, args, kwargs)
    if big is not None:
        return big
    li = index.loader()
    cd = upcast(x.dtype)
    ls = src.loader() if isinstance(src, TensorValue) else None
    scalar = not index.size or n == 0

    def at(p: Index, j: Any, t: TensorValue) -> list[Any]:
        if scalar:
            return [sympy.Integer(0)] * len(t.size)
        return [j if q == dim else p[q] for q in range(n)]

    def inside(p: Index) -> Any:
        """p's coordinates other than `dim` lie inside index's extent."""
        cond = None
        for q in range(len(p)):
            if q != dim and isz[q] < xs[q]:
                c = ops.lt(ops.index_expr(p[q], I64), ops.constant(isz[q], I64))
                cond = c if cond is None else ops.logical_and(cond, c)
        return cond

    def match(p: Index, j: Any) -> Any:
        pd = p[dim] if p else sympy.Integer(0)
        hit = lambda: ops.to_dtype(_is(pd, _wrap(li(at(p, j, index)), xs[dim])), I64)  # noqa: E731
        cond = inside(p)
        if cond is None:
            return ops.ne(hit(), ops.constant(0, I64))
        return ops.ne(ops.masked(cond, hit, 0), ops.constant(0, I64))

    def source(p: Index, j: Any) -> Any:
        if ls is None:
            return ops.constant(src, cd)
        return cast(ls(at(p, j, src)), src.dtype, cd)

    return _gathered(g, node, x, x.dtype, length, match, source, mode, include_self)


@register_lowering(aten.scatter.src, aten.scatter.value)
def scatter(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue, src: Any
           ) -> Any:
    return _scatter(g, node, x, dim, index, src, "last", True, (x, dim, index, src), {})


@register_lowering(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce_old(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue,
                       src: Any, *, reduce: str) -> Any:
    mode = {"add": "sum", "multiply": "prod"}[reduce]
    return _scatter(g, node, x, dim, index, src, mode, True, (x, dim, index, src),
                    {"reduce": reduce})


@register_lowering(aten.scatter_add)
def scatter_add(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue,
                src: Any) -> Any:
    return _scatter(g, node, x, dim, index, src, "sum", True, (x, dim, index, src), {})


@register_lowering(aten.scatter_reduce.two)
def scatter_reduce(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue,
                   src: Any, reduce: str, *, include_self: bool = True) -> Any:
    return _scatter(g, node, x, dim, index, src, reduce, include_self, (x, dim, index, src, reduce),
                    {"include_self": include_self})


# -- diagonal_scatter, as_strided_scatter (no indices: pure index arithmetic) ------------

@register_lowering(aten.diagonal_scatter)
def diagonal_scatter(g: LoweringContext, node: Node, x: TensorValue, src: TensorValue,
                     offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    n = len(x.size)
    d1, d2 = dim1 % n, dim2 % n
    lx, ls = x.loader(), src.loader()
    rest = [q for q in range(n) if q not in (d1, d2)]
    diag = len(src.size) and src.size[-1]

    def inner(p: Index) -> Any:
        on = ops.eq(ops.index_expr(p[d2] - p[d1], I64), ops.constant(offset, I64))
        pos = p[d1] if offset >= 0 else p[d2]
        fits = ops.lt(ops.index_expr(pos, I64), ops.constant(diag, I64))
        cond = ops.logical_and(on, fits)
        v = ops.masked(cond, lambda: ls([p[q] for q in rest] + [pos]), 0)
        return ops.where(cond, v, lx(p))

    return g.lazy(node, inner, x.size, x.dtype, [x, src])


@register_lowering(aten.as_strided_scatter)
def as_strided_scatter(g: LoweringContext, node: Node, x: TensorValue, src: TensorValue,
                       size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
                      ) -> Any:
    """out = x, with the elements of the view `as_strided(out, size, stride, offset)`
    taken from src. Each output element finds its view coordinates by dividing its
    storage position by the view's strides, outermost first; that is exact when the
    view does not overlap itself (else the result would depend on write order: ATen)."""
    meta = out_meta(node)
    offset = storage_offset or 0
    dims = sorted((k for k in range(len(size)) if size[k] != 1), key=lambda k: -stride[k])
    overlap = any(stride[a] < stride[b] * size[b] for a, b in zip(dims, dims[1:])) or \
        any(stride[k] == 0 for k in dims)
    if overlap:
        return g.extern(node, node.target, (x, src, size, stride, storage_offset), {},
                        fallback=True, reason="as_strided_scatter onto an overlapping view")
    out_stride = list(meta.stride())
    lx, ls = x.loader(), src.loader()

    def inner(p: Index) -> Any:
        q = sum((i * s for i, s in zip(p, out_stride)), sympy.Integer(0))
        rem = ops.sub(ops.index_expr(q, I64), ops.constant(offset, I64))
        ok = ops.ge(rem, ops.constant(0, I64))
        coords: list[Any] = [sympy.Integer(0)] * len(size)
        vals = []
        for k in dims:
            c = ops.floordiv(rem, ops.constant(stride[k], I64))
            rem = ops.sub(rem, ops.mul(c, ops.constant(stride[k], I64)))
            ok = ops.logical_and(ok, ops.lt(c, ops.constant(size[k], I64)))
            vals.append((k, c))
        ok = ops.logical_and(ok, ops.eq(rem, ops.constant(0, I64)))

        def load() -> Any:
            for k, c in vals:
                coords[k] = ops.indirect_indexing(c, size[k])
            return ls(coords)

        return ops.where(ok, ops.masked(ok, load, 0), lx(p))

    return g.lazy(node, inner, x.size, x.dtype, [x, src])

