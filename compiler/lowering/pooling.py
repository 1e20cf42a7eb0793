"""Pooling: avg_pool2d/3d, adaptive avg/max pools, max pools with indices.

Every pool is a reduction over a window: a lazy value of shape (*batch, *out, *window)
that loads the input at `start(o) + k * dilation` where that lies inside the input (and,
for adaptive pools, before the window's end), and the fill value elsewhere. Sums and
maxima of it are ordinary reductions, so a pool fuses with what surrounds it. A max pool
over a small fixed window is instead one pointwise chain over the window's elements.

Max pools give eager's indices exactly: the first maximum, but the last NaN when the
window has one (eager's CPU and CUDA loops take `val > max || isnan(val)`), and padding
is never picked, even where every element of the window is -inf.

A max pool's backward sums, for each input, the gradients of the few outputs whose
windows cover it and whose index is that input (ceil(k / s) per dim), as one pointwise
value that fuses with the gradients around it; the dense form (every output of the
plane a candidate) is left for dilated and wide-overlap windows.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from torch.fx import Node

from kernelscope.compiler.ir.indexing import FloorDiv, decompose
from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops, reduction_identity
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import cast, upcast
from kernelscope.compiler.lowering.reductions import reduce
from kernelscope.compiler.lowering.registry import aten, register_lowering
from kernelscope.compiler.lowering.scatter import _gathered, too_costly

I64 = torch.int64


@dataclass
class Windows:
    """Where each output's window lies along each spatial dim."""

    inputs: list[int]  # input sizes of the spatial dims
    outputs: list[int]
    kernel: list[int]  # window extent (for adaptive pools: the largest window)
    start: Callable[[int, sympy.Expr], sympy.Expr]  # first input coordinate, may be < 0
    dilation: list[int]
    end: Callable[[int, sympy.Expr], sympy.Expr] | None = None  # adaptive: window end

    def coord(self, d: int, o: sympy.Expr, k: sympy.Expr) -> sympy.Expr:
        return self.start(d, o) + k * self.dilation[d]

    def valid(self, d: int, o: sympy.Expr, k: sympy.Expr) -> Any:
        """Whether the window's k-th element along d lies inside the input (None: always,
        so no mask is built from constants alone)."""
        expr = self.coord(d, o, k)
        if not expr.free_symbols and self.end is None:
            return None if 0 <= int(expr) < self.inputs[d] else ops.constant(False, torch.bool)
        c = ops.index_expr(expr, I64)
        ok = ops.logical_and(ops.ge(c, ops.constant(0, I64)),
                             ops.lt(c, ops.constant(self.inputs[d], I64)))
        if self.end is not None:
            ok = ops.logical_and(ok, ops.lt(c, ops.index_expr(self.end(d, o), I64)))
        return ok

    def inside(self, outs: Index, ks: Index) -> Any:
        """All spatial dims valid (None: always)."""
        ok = None
        for d in range(len(self.inputs)):
            v = self.valid(d, outs[d], ks[d])
            ok = v if ok is None else ok if v is None else ops.logical_and(ok, v)
        return ok


def _expand(v: Any, n: int, default: Sequence[int] | None = None) -> list[int]:
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    if not v:
        return list(default) if default is not None else [0] * n
    return v * n if len(v) == 1 else v


def _window_values(g: LoweringContext, node: Node, x: TensorValue, w: Windows, fill: Any,
                   dtype: torch.dtype) -> Any:
    """The lazy (*batch, *out, *kernel) value: x in the window, `fill` outside it."""
    n = len(w.inputs)
    nb = len(x.size) - n
    lx = x.loader()

    def inner(idx: Index) -> Any:
        batch, outs, ks = idx[:nb], idx[nb:nb + n], idx[nb + n:]
        ok = w.inside(outs, ks)

        def load() -> Any:
            at = [w.coord(d, outs[d], ks[d]) for d in range(n)]
            return cast(lx(list(batch) + at), x.dtype, dtype)

        return load() if ok is None else ops.masked(ok, load, fill)

    size = list(x.size[:nb]) + w.outputs + w.kernel
    return g.lazy(node, inner, size, dtype, [x])


def _window_valid(g: LoweringContext, x: TensorValue, w: Windows) -> Any:
    n = len(w.inputs)
    nb = len(x.size) - n

    def inner(idx: Index) -> Any:
        ok = w.inside(idx[nb:nb + n], idx[nb + n:])
        return ops.constant(True, torch.bool) if ok is None else ok

    return inner


def _sum_dims(x: TensorValue, w: Windows) -> list[int]:
    nb = len(x.size) - len(w.inputs)
    return [nb + len(w.inputs) + d for d in range(len(w.inputs))]


def _avg(g: LoweringContext, node: Node, x: TensorValue, w: Windows,
         divisor: Callable[[Index], Any]) -> Any:
    out = out_meta(node).dtype
    cd = upcast(out)
    values = _window_values(g, node, x, w, 0, cd)
    total = reduce(g, node, values, _sum_dims(x, w), False, "sum", cd, cd)
    lt = total.loader()
    nb = len(x.size) - len(w.inputs)

    def inner(idx: Index) -> Any:
        return cast(ops.truediv(lt(idx), ops.to_dtype(divisor(idx[nb:]), cd)), cd, out)

    return g.lazy(node, inner, total.size, out, [total])


def _fixed(x: TensorValue, n: int, kernel_size: Any, stride: Any, padding: Any,
           dilation: Any, out_size: Sequence[int]) -> Windows:
    ks = _expand(kernel_size, n)
    st = _expand(stride, n, ks)
    pa = _expand(padding, n)
    di = _expand(dilation, n)
    return Windows(list(x.size[-n:]), list(out_size[-n:]), ks,
                   lambda d, o: o * st[d] - pa[d], di)


@register_lowering(aten.avg_pool2d, aten.avg_pool3d)
def avg_pool(g: LoweringContext, node: Node, x: TensorValue, kernel_size: Any, stride: Any = (),
             padding: Any = 0, ceil_mode: bool = False, count_include_pad: bool = True,
             divisor_override: Any = None) -> Any:
    n = 3 if node.target is aten.avg_pool3d.default else 2
    w = _fixed(x, n, kernel_size, stride, padding, 1, list(out_meta(node).shape))
    pa = _expand(padding, n)

    def divisor(outs: Index) -> Any:
        if divisor_override:
            return ops.constant(divisor_override, I64)
        count = None
        for d in range(n):
            lo = ops.index_expr(w.start(d, outs[d]), I64)
            hi = ops.minimum(ops.add(lo, ops.constant(w.kernel[d], I64)),
                             ops.constant(w.inputs[d] + pa[d], I64))
            if not count_include_pad:
                lo = ops.maximum(lo, ops.constant(0, I64))
                hi = ops.minimum(hi, ops.constant(w.inputs[d], I64))
            span = ops.sub(hi, lo)
            count = span if count is None else ops.mul(count, span)
        return count

    return _avg(g, node, x, w, divisor)


def _adaptive(x: TensorValue, output_size: Sequence[int]) -> Windows:
    """Window o of n along a dim of size s: [floor(o*s/n), ceil((o+1)*s/n))."""
    n = len(output_size)
    ins, outs = list(x.size[-n:]), [int(o) for o in output_size]

    def start(d: int, o: sympy.Expr) -> sympy.Expr:
        return FloorDiv(o * ins[d], outs[d])

    def end(d: int, o: sympy.Expr) -> sympy.Expr:
        return FloorDiv((o + 1) * ins[d] + outs[d] - 1, outs[d])

    kernel = [max(-(-((o + 1) * s) // m) - (o * s) // m for o in range(m)) if m else 0
              for s, m in zip(ins, outs)]
    return Windows(ins, outs, kernel, start, [1] * n, end)


@register_lowering(aten._adaptive_avg_pool3d, aten._adaptive_avg_pool2d)
def adaptive_avg_pool(g: LoweringContext, node: Node, x: TensorValue, output_size: Sequence[int]
                     ) -> Any:
    w = _adaptive(x, output_size)

    def divisor(outs: Index) -> Any:
        count = None
        for d in range(len(w.inputs)):
            span = ops.index_expr(w.end(d, outs[d]) - w.start(d, outs[d]), I64)  # type: ignore[misc]
            count = span if count is None else ops.mul(count, span)
        return count

    return _avg(g, node, x, w, divisor)


def _max_pool(g: LoweringContext, node: Node, x: TensorValue, w: Windows) -> tuple[Any, Any]:
    """(values, flat input indices over the spatial dims), as eager computes them."""
    dtype = x.dtype
    if dtype != torch.bool and w.end is None and math.prod(w.kernel) <= UNROLLED_WINDOW:
        return _max_pool_unrolled(g, node, x, w)
    floating = dtype.is_floating_point
    fill = reduction_identity("max", dtype)
    win = _window_values(g, node, x, w, fill, dtype)
    dims = _sum_dims(x, w)
    best = reduce(g, node, win, dims, False, "max", dtype, dtype)
    n = len(w.inputs)
    nb = len(x.size) - n
    kn = math.prod(w.kernel)
    lwin, lbest, valid = win.loader(), best.loader(), _window_valid(g, x, w)

    def key(idx: Index) -> Any:
        """NaN at flat window position k: kn + k (the last wins); the maximum:
        kn - 1 - k (the first wins); neither, or outside the input: -1."""
        v, m, ok = lwin(idx), lbest(idx[:nb + n]), valid(idx)
        k = sum((idx[nb + n + d] * math.prod(w.kernel[d + 1:]) for d in range(n)),
                sympy.Integer(0))
        kv = ops.index_expr(k, I64)
        top = ops.where(ops.logical_and(ok, ops.eq(v, m)),
                        ops.sub(ops.constant(kn - 1, I64), kv), ops.constant(-1, I64))
        if not floating:
            return top
        return ops.where(ops.logical_and(ok, ops.isnan(v)),
                         ops.add(ops.constant(kn, I64), kv), top)

    keyed = g.lazy(node, key, win.size, I64, [win, best])
    keys = reduce(g, node, keyed, dims, False, "max", I64, I64)
    lk = keys.loader()

    def value(idx: Index) -> Any:
        if not floating:
            return lbest(idx)
        return ops.where(ops.ge(lk(idx), ops.constant(kn, I64)),
                         ops.constant(float("nan"), dtype), lbest(idx))

    def index(idx: Index) -> Any:
        kk = lk(idx)
        k = ops.where(ops.ge(kk, ops.constant(kn, I64)), ops.sub(kk, ops.constant(kn, I64)),
                      ops.sub(ops.constant(kn - 1, I64), kk))
        flat = ops.constant(0, I64)
        for d in range(n):
            kd = ops.mod(ops.floordiv(k, ops.constant(math.prod(w.kernel[d + 1:]), I64)),
                         ops.constant(w.kernel[d], I64))
            c = ops.add(ops.index_expr(w.start(d, idx[nb + d]), I64),
                        ops.mul(kd, ops.constant(w.dilation[d], I64)))
            flat = ops.add(ops.mul(flat, ops.constant(w.inputs[d], I64)), c)
        return flat

    size = best.size
    return (g.lazy(node, value, size, dtype, [best, keys]), g.lazy(node, index, size, I64, [keys]))


# Fixed windows up to this many elements are one pointwise chain over the window, as
# Inductor lowers them, instead of two reductions (max, then eager's NaN and index rule):
# a reduction over 9 elements pads them to a 16-wide block and carries 64-bit keys.
UNROLLED_WINDOW = 25


def _max_pool_unrolled(g: LoweringContext, node: Node, x: TensorValue, w: Windows
                       ) -> tuple[Any, Any]:
    """Eager's loop over the window in order: an element inside the input is taken when
    it is greater than the best so far or NaN (the first maximum, the last NaN); for the
    index, the first element inside the input is taken anyway (an all -inf window)."""
    dtype = x.dtype
    fill = reduction_identity("max", dtype)
    n = len(w.inputs)
    nb = len(x.size) - n
    lx = x.loader()
    size = list(x.size[:nb]) + w.outputs

    def chain(idx: Index, indices: bool) -> Any:
        batch, outs = list(idx[:nb]), idx[nb:]
        best, where = ops.constant(fill, dtype), ops.constant(-1, I64)
        for ks in itertools.product(*[range(k) for k in w.kernel]):
            ok = w.inside(outs, [sympy.Integer(k) for k in ks])
            at = [w.coord(d, outs[d], sympy.Integer(ks[d])) for d in range(n)]
            v = lx(batch + at) if ok is None else ops.masked(ok, lambda at=at: lx(batch + at),
                                                               fill)
            take = ops.gt(v, best)
            if dtype.is_floating_point:
                take = ops.logical_or(take, ops.isnan(v))
            if indices:
                take = ops.logical_or(take, ops.eq(where, ops.constant(-1, I64)))
            take = take if ok is None else ops.logical_and(ok, take)
            best = ops.where(take, v, best)
            if indices:
                flat = sum((at[d] * math.prod(w.inputs[d + 1:]) for d in range(n)),
                           sympy.Integer(0))
                where = ops.where(take, ops.index_expr(flat, I64), where)
        return where if indices else best

    return (g.lazy(node, lambda idx: chain(idx, False), size, dtype, [x]),
            g.lazy(node, lambda idx: chain(idx, True), size, I64, [x]))


@register_lowering(aten.max_pool2d_with_indices, aten.max_pool3d_with_indices)
def max_pool_with_indices(g: LoweringContext, node: Node, x: TensorValue, kernel_size: Any,
                          stride: Any = (), padding: Any = 0, dilation: Any = 1,
                          ceil_mode: bool = False) -> Any:
    n = 3 if node.target is aten.max_pool3d_with_indices.default else 2
    meta = out_meta(node)[0]
    return _max_pool(g, node, x, _fixed(x, n, kernel_size, stride, padding, dilation,
                                  list(meta.shape)))


@register_lowering(aten.adaptive_max_pool2d, aten.adaptive_max_pool3d)
def adaptive_max_pool(g: LoweringContext, node: Node, x: TensorValue, output_size: Sequence[int]
                     ) -> Any:
    return _max_pool(g, node, x, _adaptive(x, output_size))


@register_lowering(aten.max_pool2d_with_indices_backward, aten.max_pool3d_with_indices_backward)
def max_pool_backward(g: LoweringContext, node: Node, grad: TensorValue, x: TensorValue,
                      kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
                      indices: TensorValue) -> Any:
    """grad_input[p] = sum of grad[o] over the outputs o of p's plane whose index is p."""
    n = 3 if node.target is aten.max_pool3d_with_indices_backward.default else 2
    args = (grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices)
    windowed = _windowed_backward(g, node, grad, x, indices, n, kernel_size, stride, padding,
                                  dilation)
    if windowed is not None:
        return windowed
    plane_out = math.prod(grad.size[-n:])
    big = too_costly(g, node, x.numel(), plane_out, args, {})
    if big is not None:
        return big
    out = out_meta(node).dtype
    cd = upcast(out)
    zero = g.lazy(node, lambda idx: ops.constant(0, out), x.size, out, [])
    nb = len(x.size) - n
    lg, li = grad.loader(), indices.loader()
    osz, isz = list(grad.size[-n:]), list(x.size[-n:])

    def at(p: Index, j: Any) -> list[Any]:
        return list(p[:nb]) + decompose(j, osz)

    def match(p: Index, j: Any) -> Any:
        flat = sympy.Integer(0)
        for d in range(n):
            flat = flat * isz[d] + p[nb + d]
        return ops.eq(li(at(p, j)), ops.index_expr(flat, I64))

    def source(p: Index, j: Any) -> Any:
        return cast(lg(at(p, j)), grad.dtype, cd)

    return _gathered(g, node, zero, out, plane_out, match, source, "sum")


WINDOWED_CANDIDATES = 25  # outputs whose windows may hold one input (3x3 stride 2: 4)


def _windowed_backward(g: LoweringContext, node: Node, grad: TensorValue, x: TensorValue,
                       indices: TensorValue, n: int, kernel_size: Any, stride: Any,
                       padding: Any, dilation: Any) -> Any:
    """grad_input[p] = the sum of grad[o] over the few outputs o whose window covers p
    (at most ceil(k / s) per dim) whose index is p, added in eager's order (o ascending),
    as one pointwise value; None (the dense form) for dilated or wide-overlap windows.
    ResNet's 3x3 stride-2 pool: 4 candidates per input, where the dense form's plane of
    outputs (3136) is too costly and would go to ATen."""
    ks, st = _expand(kernel_size, n), _expand(stride, n, _expand(kernel_size, n))
    pa, di = _expand(padding, n), _expand(dilation, n)
    reach = [-(-k // s) for k, s in zip(ks, st)]
    if any(d != 1 for d in di) or math.prod(reach) > WINDOWED_CANDIDATES:
        return None
    out = out_meta(node).dtype
    cd = upcast(out)
    nb = len(x.size) - n
    lg, li = grad.loader(), indices.loader()
    osz, isz = list(grad.size[-n:]), list(x.size[-n:])

    def inner(idx: Index) -> Any:
        batch, coords = list(idx[:nb]), list(idx[nb:])
        flat = sympy.Integer(0)
        for d in range(n):
            flat = flat * isz[d] + coords[d]
        # The first output whose window reaches coords[d]: ceil((c + p - k + 1) / s),
        # written with a non-negative numerator (FloorDiv's domain).
        first = [FloorDiv(coords[d] + pa[d] - ks[d] + reach[d] * st[d], st[d]) + 1 - reach[d]
                 for d in range(n)]
        total = ops.constant(0, cd)
        for ts in itertools.product(*(range(r) for r in reach)):
            o = [first[d] + ts[d] for d in range(n)]
            ok = None
            for d in range(n):
                od = ops.index_expr(o[d], I64)
                starts = ops.index_expr(o[d] * st[d] - pa[d] - coords[d], I64)
                v = ops.logical_and(
                    ops.logical_and(ops.ge(od, ops.constant(0, I64)),
                                    ops.lt(od, ops.constant(osz[d], I64))),
                    ops.le(starts, ops.constant(0, I64)))
                ok = v if ok is None else ops.logical_and(ok, v)

            def part(o: list[Any] = o) -> Any:
                at = batch + o
                v = cast(lg(at), grad.dtype, cd)
                return ops.where(ops.eq(li(at), ops.index_expr(flat, I64)), v,
                                 ops.constant(0, cd))

            total = ops.add(total, ops.masked(ok, part, 0))
        return cast(total, cd, out)

    return g.lazy(node, inner, x.size, out, [grad, indices])
