"""Reduction lowerings: sum, mean, amax, amin, prod, any, all, argmax, argmin, var.

Every reduction becomes a `Reduction` loop body and is stored to a buffer; its input is
inlined (a pointwise prologue costs nothing). mean and var are built from sums, so the
scheduler can put a whole layer norm in one kernel. A long reduction with few outputs
is split in two passes so that the first one keeps the whole device busy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import sympy
import torch
from torch.fx import Node

from kernelscope.compiler.features import Feature
from kernelscope.compiler.ir.handlers import body_vars, reads_of
from kernelscope.compiler.ir.indexing import decompose, simplify_index, steps_along_outputs, sym
from kernelscope.compiler.ir.nodes import Index, Stored, TensorValue
from kernelscope.compiler.ir.ops import ops
from kernelscope.compiler.ir.ops import reduction_identity as identity
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import cast, upcast
from kernelscope.compiler.lowering.registry import aten, prims, register_lowering
from kernelscope.compiler.lowering.views import remap

SPLIT_MAX_OUTPUTS = 64  # split only when a reduction has at most this many outputs
SPLIT_MIN_RNUMEL = 16384  # ... and at least this many elements per output
SPLIT_CHUNK = 4096  # elements per row of the first pass: short enough to stay persistent
SPLIT_MAX = 4096  # rows of the first pass (= elements the second pass reduces)
# Column reductions (the loads step along the outputs: x.sum(0), a bias gradient) run
# COLUMN_OUTPUTS outputs a program (codegen/triton/rules.py column_config): few outputs
# are a few long, latency-bound programs. Split so the first pass has about
# COLUMN_PROGRAMS programs (8 of 256 threads per SM fill an H200's 132), each reducing at
# least COLUMN_MIN_CHUNK rows; a split count that divides the rows exactly is preferred
# (no mask in the first pass, and a producer over the rows fuses into it).
# Row sums with more outputs than SPLIT_MAX_OUTPUTS but at most ROW_SPLIT_MAX_OUTPUTS
# (one row a program of 16 warps: 4 per SM, 132 SMs, codegen/triton/rules.py FEW_ROWS)
# run as less than one wave; split them toward ROW_SPLIT_PROGRAMS programs, in whole
# slices of the outermost reduced dim, chunks of at least ROW_SPLIT_MIN_CHUNK.
ROW_SPLIT_MAX_OUTPUTS = 4 * 132
ROW_SPLIT_PROGRAMS = 1024
ROW_SPLIT_MIN_CHUNK = 4096
COLUMN_OUTPUTS = 16
COLUMN_PROGRAMS = 1024
COLUMN_MIN_CHUNK = 256
# Reductions whose partial results the second pass reduces the same way (not argmax/argmin:
# their partials are indices).
SPLITTABLE = frozenset({"sum", "prod", "max", "min", "any", "all", "logsumexp"})


def _dims(dims: Any, ndim: int) -> list[int]:
    if ndim == 0:  # a 0-d tensor accepts dim 0 / -1 and has nothing to reduce over
        return []
    if dims is None or dims == [] or dims == ():
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d + ndim if d < 0 else d for d in dims})


def reduce(g: LoweringContext, node: Node, x: TensorValue, dims: Any, keepdim: bool, rtype: str,
           out_dtype: torch.dtype | None = None, src_dtype: torch.dtype | None = None
           ) -> Stored:
    """Reduce `x` over `dims`; the result is a stored buffer of the keepdim shape."""
    ndim = len(x.size)
    rdims = _dims(dims, ndim)
    out_size = [1 if k in rdims else x.size[k] for k in range(ndim)]
    rranges = [x.size[k] for k in rdims]
    out_dtype = out_dtype or x.dtype
    src = src_dtype or (x.dtype if rtype.startswith("arg") else upcast(out_dtype))
    load = x.loader()

    def full_index(idx: Index, ridx: Index) -> list[Any]:
        full, it = list(idx), iter(ridx)
        for k in rdims:
            full[k] = next(it)
        return full

    def value(full: list[Any]) -> Any:
        return cast(load(full), x.dtype, src)

    rnumel, numel = math.prod(rranges), math.prod(out_size)
    if rnumel == 0 or not rranges:
        # Over nothing: the identity (sum 0, prod 1, any False, all True). Over a single
        # element per output (0-d input, dims of size one only): that element itself.
        stored = _trivial(g, node, x, out_size, rdims, rtype, src, out_dtype, value, rnumel == 0)
    else:
        body = g.make_reduction(node, lambda idx, ridx: value(full_index(idx, ridx)),
                                out_size, rranges, rtype, out_dtype, src, [x])
        plan = split_plan(body, numel, rranges, rtype) \
            if Feature.SPLIT_REDUCTIONS in g.features and rtype in SPLITTABLE else None
        if plan is not None:
            stored = _split(g, node, x, out_size, rranges, rtype, src, out_dtype, value,
                            full_index, rnumel, *plan)
        else:
            stored = g.reduction_buffer(node, body, out_size, "reduction")
    if keepdim:
        return stored
    return stored.with_view([s for k, s in enumerate(out_size) if k not in rdims],
                            [st for k, st in enumerate(stored.view.stride) if k not in rdims],
                            stored.view.offset)


def _trivial(g: LoweringContext, node: Node, x: TensorValue, out_size: list[int],
             rdims: list[int], rtype: str, src: torch.dtype, out_dtype: torch.dtype,
             value: Any, empty: bool) -> Stored:
    def inner(idx: Index) -> Any:
        if empty:
            return ops.constant(identity(rtype, out_dtype), out_dtype)
        if rtype.startswith("arg"):
            return ops.constant(0, out_dtype)
        full = [sympy.Integer(0) if k in rdims else i for k, i in enumerate(idx)]
        v = value(full)
        if rtype in ("any", "all"):
            v = ops.ne(v, ops.constant(0, src)) if src != torch.bool else v
        return cast(v, src, out_dtype)

    lazy = g.lazy(node, inner, out_size, out_dtype, [x])
    reason = "reduction over zero elements" if empty else "reduction over one element"
    return g.realize(lazy, reason)


def split_plan(node: Any, numel: int, rranges: list[int], rtype: str
               ) -> tuple[int, bool] | None:
    """(parts, columns) for a reduction that runs too few programs as one kernel: a
    column split (its loads step along the outputs: x.sum(0), a batch norm's sums over
    N x H x W of an NHWC tensor, however few the channels), else a row split (few outputs
    over long rows, in SPLIT_CHUNK pieces; or row_splits); None keeps it one kernel."""
    rnumel = math.prod(rranges)
    parts = column_splits(node, numel, rnumel)
    if parts is not None:
        return parts, True
    if numel <= SPLIT_MAX_OUTPUTS and rnumel >= SPLIT_MIN_RNUMEL:
        return max(2, min(SPLIT_MAX, -(-rnumel // SPLIT_CHUNK))), False
    rows = row_splits(numel, rranges, rtype)
    return (rows, False) if rows is not None else None


def _nearest(want: int, fits: Callable[[int], bool]) -> int | None:
    """The count in want/2 .. 2*want for which fits(count) holds nearest `want` (the larger
    of two as near), or None."""
    found = [d for d in range(max(2, want // 2), 2 * want + 1) if fits(d)]
    return min(found, key=lambda d: (abs(d - want), -d)) if found else None


def column_splits(node: Any, numel: int, rnumel: int) -> int | None:
    """How many parts a column reduction's rows are split into (COLUMN_* above), or None
    to keep it one kernel (not a column walk, enough programs already, rows too short)."""
    programs = -(-numel // COLUMN_OUTPUTS)
    if programs >= COLUMN_PROGRAMS or rnumel < 2 * COLUMN_MIN_CHUNK or numel < 2:
        return None
    variables, rvars = body_vars(node)
    out = list(node.ranges)
    flat_x, flat_r = sym("split_x"), sym("split_r")
    at = dict(zip(variables, decompose(flat_x, out)))
    at.update(zip(rvars, decompose(flat_r, list(node.reduction_ranges))))
    loads = [simplify_index(read.index.xreplace(at), {flat_x: numel - 1, flat_r: rnumel - 1})
             for read in reads_of(node)]
    steps = steps_along_outputs(loads, flat_x, numel, flat_r, rnumel) if loads else None
    if steps is None or not steps[0]:
        return None
    want = -(-COLUMN_PROGRAMS // programs)
    most = rnumel // COLUMN_MIN_CHUNK
    if most < 2:
        return None
    want = max(2, min(want, most))
    exact = _nearest(want, lambda d: rnumel % d == 0 and rnumel // d >= COLUMN_MIN_CHUNK // 2)
    return exact if exact is not None else want


def row_splits(numel: int, rranges: list[int], rtype: str) -> int | None:
    """Parts for a sum over long rows with too few outputs for one row a program to fill
    the GPU (ROW_SPLIT_*), in whole slices of the outermost reduced dim (a batch-norm
    gradient over N x H x W splits N): the first pass then reads a producer over the rows
    where it computes it. None: keep one kernel."""
    rnumel = math.prod(rranges)
    if rtype != "sum" or not SPLIT_MAX_OUTPUTS < numel <= ROW_SPLIT_MAX_OUTPUTS or \
            rnumel < SPLIT_MIN_RNUMEL:
        return None
    want = -(-ROW_SPLIT_PROGRAMS // numel)
    outer = rranges[0]
    return _nearest(want, lambda d: outer % d == 0 and rnumel // d >= ROW_SPLIT_MIN_CHUNK)


def _split(g: LoweringContext, node: Node, x: TensorValue, out_size: list[int],
           rranges: list[int], rtype: str, src: torch.dtype, out_dtype: torch.dtype,
           value: Any, full_index: Any, rnumel: int, splits: int, columns: bool) -> Stored:
    """Two passes: `splits` partial results of `chunk` elements each (in the reduction's
    accumulation dtype), then their reduction. Column reductions keep the partials as
    [splits, outputs] (the first pass's loads then step along the outputs, as the
    original's did); the others as [outputs, splits]."""
    chunk = -(-rnumel // splits)
    exact = chunk * splits == rnumel
    ident = identity(rtype, src)

    slices = exact and rranges[0] % splits == 0  # each part whole outer slices

    def partial(idx: Index, ridx: Index) -> Any:
        part, outs = (idx[0], idx[1:]) if columns else (idx[-1], idx[:-1])
        flat = part * chunk + ridx[0]
        if slices:  # the same element, through a division of ridx alone (a dense walk)
            per = rranges[0] // splits
            at = decompose(ridx[0], [per, *rranges[1:]])
            at[0] = at[0] + part * per
        else:
            at = decompose(flat, rranges)
        body = lambda: value(full_index(outs, at))  # noqa: E731
        if exact:
            return body()
        inside = ops.lt(ops.index_expr(flat, torch.int64), ops.constant(rnumel, torch.int64))
        return ops.masked(inside, body, ident)

    size1 = [splits] + out_size if columns else out_size + [splits]
    node1 = g.make_reduction(node, partial, size1, [chunk], rtype, src, src, [x])
    kind = "column split reduction" if columns else "split reduction"
    how = f"{kind}: {rnumel} = {splits} x {chunk}"
    first = g.reduction_buffer(node, node1, size1, f"{how} (pass 1 of 2)")
    load1 = first.loader()

    def combine(idx: Index, ridx: Index) -> Any:
        return load1([ridx[0]] + list(idx) if columns else list(idx) + [ridx[0]])

    node2 = g.make_reduction(node, combine, out_size, [splits], rtype, out_dtype, src, [])
    return g.reduction_buffer(node, node2, out_size, f"{how} (pass 2 of 2)")


def _out_dtype(node: Node) -> torch.dtype:
    meta = out_meta(node)
    return (meta[0] if isinstance(meta, (tuple, list)) else meta).dtype


@register_lowering(aten.sum.dim_IntList, aten.sum.default, prims.sum)
def sum_(g: LoweringContext, node: Node, x: TensorValue, dims: Any = None, keepdim: bool = False,
         dtype: torch.dtype | None = None, **kw: Any) -> Stored:
    return reduce(g, node, x, dims, keepdim, "sum", _out_dtype(node))


@register_lowering(aten.prod.dim_int, aten.prod.default)
def prod(g: LoweringContext, node: Node, x: TensorValue, dim: Any = None, keepdim: bool = False,
         **kw: Any) -> Stored:
    return reduce(g, node, x, dim, keepdim, "prod", _out_dtype(node))


def _isnan(g: LoweringContext, node: Node, x: TensorValue) -> Any:
    load = x.loader()
    return g.lazy(node, lambda idx: ops.isnan(load(idx)), x.size, torch.bool, [x])


def _nan_aware(g: LoweringContext, node: Node, x: TensorValue, dims: Any, keepdim: bool, rtype: str,
               out_dtype: torch.dtype) -> Any:
    """max/min/argmax/argmin of floats as eager: a NaN anywhere in the row wins (argmax:
    the first NaN). Built from NaN-blind reductions plus `any(isnan)` and the index of the
    first NaN, so every backend's max/min combine may ignore NaNs; all of them fuse into
    one kernel (same iteration space)."""
    best = reduce(g, node, x, dims, keepdim, rtype, out_dtype, None if rtype in ("max", "min")
                  else x.dtype)
    if not x.dtype.is_floating_point or _only_shifts_its_input(g, node):
        return best
    nan = _isnan(g, node, x)
    has_nan = reduce(g, node, nan, dims, keepdim, "any", torch.bool, torch.bool)
    lb, lh = best.loader(), has_nan.loader()
    if rtype in ("max", "min"):
        def inner(idx: Index) -> Any:
            return ops.where(lh(idx), ops.constant(float("nan"), upcast(out_dtype)), lb(idx))
    else:
        load_nan = nan.loader()
        as_int = g.lazy(node, lambda idx: ops.to_dtype(load_nan(idx), torch.int8), x.size,
                        torch.int8, [nan])
        first = reduce(g, node, as_int, dims, keepdim, "argmax", torch.int64, torch.int8)
        lf = first.loader()

        def inner(idx: Index) -> Any:
            return ops.where(lh(idx), lf(idx), lb(idx))
    return g.lazy(node, inner, best.size, out_dtype, [])


def _only_shifts_its_input(g: LoweringContext, node: Node) -> bool:
    """True for the max inside softmax / log_softmax (`x - amax(x)`, then a sum of exp over
    the row): a NaN in the row already makes the whole row NaN there, so this max need not
    carry it. Decided from the op the decomposition came from, not from the graph's shape."""
    if not node.users or not node.args:
        return False
    whole = getattr(node.meta.get("original_aten"), "overloadpacket", None)
    if whole not in (aten._softmax, aten._log_softmax):
        return False
    src = node.args[0]
    return all(u.target is aten.sub.Tensor and u.args[0] is src for u in node.users)


@register_lowering(aten.amax, prims.amax)
def amax(g: LoweringContext, node: Node, x: TensorValue, dims: Any = None, keepdim: bool = False
        ) -> Any:
    return _nan_aware(g, node, x, dims, keepdim, "max", _out_dtype(node))


@register_lowering(aten.amin, prims.amin)
def amin(g: LoweringContext, node: Node, x: TensorValue, dims: Any = None, keepdim: bool = False
        ) -> Any:
    return _nan_aware(g, node, x, dims, keepdim, "min", _out_dtype(node))


@register_lowering(aten.any.dim, aten.any.dims, aten.any.default)
def any_(g: LoweringContext, node: Node, x: TensorValue, dim: Any = None, keepdim: bool = False
        ) -> Stored:
    return reduce(g, node, x, dim, keepdim, "any", torch.bool, torch.bool)


@register_lowering(aten.all.dim, aten.all.dims, aten.all.default)
def all_(g: LoweringContext, node: Node, x: TensorValue, dim: Any = None, keepdim: bool = False
        ) -> Stored:
    return reduce(g, node, x, dim, keepdim, "all", torch.bool, torch.bool)


@register_lowering(aten.argmax)
def argmax(g: LoweringContext, node: Node, x: TensorValue, dim: int | None = None,
           keepdim: bool = False) -> Any:
    return _arg_reduce(g, node, x, dim, keepdim, "argmax")


@register_lowering(aten.argmin)
def argmin(g: LoweringContext, node: Node, x: TensorValue, dim: int | None = None,
           keepdim: bool = False) -> Any:
    return _arg_reduce(g, node, x, dim, keepdim, "argmin")


def _arg_reduce(g: LoweringContext, node: Node, x: TensorValue, dim: int | None, keepdim: bool,
                rtype: str) -> Any:
    if dim is None:
        n = x.numel()
        flat = remap(g, node, x, [n], lambda idx: decompose(idx[0], list(x.size)))
        out = _nan_aware(g, node, flat, [0], False, rtype, torch.int64)
        if not keepdim:
            return out
        return remap(g, node, out, [1] * len(x.size), lambda idx: [])
    return _nan_aware(g, node, x, [dim], keepdim, rtype, torch.int64)


def _extreme(g: LoweringContext, node: Node, x: TensorValue, dims: Any, keepdim: bool, rtype: str
            ) -> Any:
    """max/min values as eager's; bools through int8 (no backend reduces bools by max)."""
    if x.dtype != torch.bool:
        return _nan_aware(g, node, x, dims, keepdim, rtype, x.dtype)
    small = _int8(g, node, x)
    best = reduce(g, node, small, dims, keepdim, rtype, torch.int8, torch.int8)
    lb = best.loader()
    return g.lazy(node, lambda idx: ops.to_dtype(lb(idx), torch.bool), best.size, torch.bool,
                  [best])


def _int8(g: LoweringContext, node: Node, x: TensorValue) -> Any:
    load = x.loader()
    return g.lazy(node, lambda idx: ops.to_dtype(load(idx), torch.int8), x.size, torch.int8, [x])


def _extreme_dim(g: LoweringContext, node: Node, x: TensorValue, dim: int, keepdim: bool,
                 rtype: str) -> tuple[Any, Any]:
    """(values, indices) as eager: a NaN wins and its first index is returned."""
    src = _int8(g, node, x) if x.dtype == torch.bool else x
    return (_extreme(g, node, x, [dim], keepdim, rtype),
            _arg_reduce(g, node, src, dim, keepdim, f"arg{rtype}"))


@register_lowering(aten.max.dim)
def max_dim(g: LoweringContext, node: Node, x: TensorValue, dim: int, keepdim: bool = False
           ) -> tuple[Any, Any]:
    return _extreme_dim(g, node, x, dim, keepdim, "max")


@register_lowering(aten.min.dim)
def min_dim(g: LoweringContext, node: Node, x: TensorValue, dim: int, keepdim: bool = False
           ) -> tuple[Any, Any]:
    return _extreme_dim(g, node, x, dim, keepdim, "min")


@register_lowering(aten.max.default)
def max_all(g: LoweringContext, node: Node, x: TensorValue) -> Any:
    return _extreme(g, node, x, None, False, "max")


@register_lowering(aten.min.default)
def min_all(g: LoweringContext, node: Node, x: TensorValue) -> Any:
    return _extreme(g, node, x, None, False, "min")


@register_lowering(aten.mean.dim, aten.mean.default)
def mean(g: LoweringContext, node: Node, x: TensorValue, dims: Any = None, keepdim: bool = False,
         dtype: torch.dtype | None = None) -> Any:
    out = _out_dtype(node)
    total = reduce(g, node, x, dims, keepdim, "sum", upcast(out), upcast(out))
    n = _count(x, dims)
    return _scale(g, node, total, _inv(n), out)


def _inv(n: float) -> float:
    return 1.0 / n if n > 0 else float("nan")


def _count(x: TensorValue, dims: Any) -> int:
    return math.prod(x.size[k] for k in _dims(dims, len(x.size)))


def _scale(g: LoweringContext, node: Node, total: Stored, factor: float, out: torch.dtype) -> Any:
    load = total.loader()
    cd = total.dtype
    if not math.isfinite(factor):
        factor = float("nan")

    def inner(idx: Index) -> Any:
        return cast(ops.mul(load(idx), ops.constant(factor, cd)), cd, out)

    return g.lazy(node, inner, total.size, out, [])


def _divide(g: LoweringContext, node: Node, total: Stored, divisor: float, out: torch.dtype) -> Any:
    if divisor > 0:
        return _scale(g, node, total, 1.0 / divisor, out)
    load = total.loader()
    cd = total.dtype

    def inner(idx: Index) -> Any:
        return cast(ops.truediv(load(idx), ops.constant(divisor, cd)), cd, out)

    return g.lazy(node, inner, total.size, out, [])


def variance(g: LoweringContext, node: Node, x: TensorValue, dims: Any, correction: float,
             keepdim: bool) -> tuple[Any, Any]:
    """(var, mean) from two sums: mean first, then the sum of squared deviations."""
    out = x.dtype
    acc = upcast(out)
    n = _count(x, dims)
    total = reduce(g, node, x, dims, True, "sum", acc, acc)
    mean_keep = _scale(g, node, total, _inv(n), acc)
    load_x, load_m = x.loader(), mean_keep.loader()
    rdims = _dims(dims, len(x.size))

    def sq_dev(idx: Index) -> Any:
        m_idx = [sympy.Integer(0) if k in rdims else i for k, i in enumerate(idx)]
        xv = cast(load_x(idx), x.dtype, acc)
        d = ops.sub(xv, load_m(m_idx))
        return ops.mul(d, d)

    dev = g.lazy(node, sq_dev, x.size, acc, [x, mean_keep])
    ssq = reduce(g, node, dev, dims, keepdim, "sum", acc, acc)
    # eager clamps the degrees of freedom at 0 and divides: inf, or nan where ssq is 0.
    dof = max(0.0, n - correction)
    var = _divide(g, node, ssq, dof, out)
    mean_out = _scale(g, node, total, _inv(n), out)
    if not keepdim:
        keep = [s for k, s in enumerate(x.size) if k not in rdims]
        inner = mean_out

        def drop(idx: Index) -> list[Any]:
            it = iter(idx)
            return [sympy.Integer(0) if k in rdims else next(it) for k in range(len(x.size))]

        mean_out = remap(g, node, inner, keep, drop)
    return var, mean_out


@register_lowering(aten.var.correction, aten.var.dim, prims.var)
def var(g: LoweringContext, node: Node, x: TensorValue, dims: Any = None, unbiased: Any = None,
        keepdim: bool = False, *, correction: Any = None) -> Any:
    return variance(g, node, x, dims, _correction(unbiased, correction), keepdim)[0]


@register_lowering(aten.var_mean.correction, aten.var_mean.dim)
def var_mean(g: LoweringContext, node: Node, x: TensorValue, dims: Any = None, unbiased: Any = None,
             keepdim: bool = False, *, correction: Any = None) -> Any:
    return variance(g, node, x, dims, _correction(unbiased, correction), keepdim)


def _correction(unbiased: Any, correction: Any) -> float:
    if correction is not None:
        return float(correction)
    if isinstance(unbiased, bool):
        return 1.0 if unbiased else 0.0
    return 1.0

