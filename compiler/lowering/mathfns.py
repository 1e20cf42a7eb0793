"""Math-function lowerings: special functions, sign bits, rounding to decimals, frexp.

Each is one op of the ops protocol (ops.MATH_UNARY / MATH_BINARY) applied elementwise,
or a short composite of ops with eager's own formula (ldexp, angle, round(decimals)). A
backend with no rule for the op at the compute dtype (most special functions under the
Triton interpreter, where libdevice does not run) leaves the node to ATen and says why
(GraphLowering asks the backend about every op a node's body uses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from torch.fx import Node

from kernelscope.compiler.ir.ops import POLYNOMIALS, ops
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import compute_dtype, pointwise
from kernelscope.compiler.lowering.registry import aten, register_lowering

UNARY = {  # aten op name -> op of the protocol
    **{n: n for n in "log10 erfc erfinv lgamma digamma i0 signbit asinh acosh atanh".split()},
    **{f"special_{n}": n for n in (
        "i0e i1 i1e erfcx ndtri log_ndtr bessel_j0 bessel_j1 bessel_y0 bessel_y1 "
        "modified_bessel_i0 modified_bessel_i1 modified_bessel_k0 modified_bessel_k1 "
        "scaled_modified_bessel_k0 scaled_modified_bessel_k1 spherical_bessel_j0 "
        "airy_ai").split()},
}
BINARY = {**{n: n for n in "hypot fmin fmax copysign nextafter igamma igammac".split()},
          "special_zeta": "zeta", **{f"special_{p}": p for p in POLYNOMIALS}}


def _float_only(g: LoweringContext, node: Node, name: str, fn: Any, args: Sequence[Any],
                operands: Sequence[Any]) -> Any:
    """Math functions compute in floating point; an integer result (a polynomial of int
    operands) stays with ATen."""
    out = out_meta(node).dtype
    if not out.is_floating_point and name != "signbit":
        return g.extern(node, node.target, tuple(args), {}, fallback=True,
                        reason=f"{name} with a {out} result")
    return pointwise(g, node, fn, *operands)


def _register(aten_name: str, op: str) -> None:
    def lowering(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
        if kwargs:  # not in the ATen graphs these come from; never guessed at
            return g.extern(node, node.target, args, kwargs, fallback=True,
                            reason="keyword arguments")
        return _float_only(g, node, op, lambda *v: getattr(ops, op)(*v), args, args)

    register_lowering(getattr(aten, aten_name))(lowering)


for _aten, _op in {**UNARY, **BINARY}.items():
    if hasattr(aten, _aten):
        _register(_aten, _op)


@register_lowering(aten.polygamma)
def polygamma(g: LoweringContext, node: Node, n: int, x: Any) -> Any:
    # eager: digamma for n = 0, trigamma for n = 1 (inside calc_polygamma's rule), else
    # (-1)^(n+1) n! zeta(n+1, x)
    def fn(v: Any) -> Any:
        if n == 0:
            return ops.digamma(v)
        return ops.polygamma(ops.constant(n, torch.int32), v)

    return _float_only(g, node, "polygamma", fn, (n, x), [x])


@register_lowering(aten.frexp)
def frexp(g: LoweringContext, node: Node, x: Any) -> Any:
    mantissa, exponent = out_meta(node)
    cdtype = compute_dtype(mantissa.dtype, [x])
    m = pointwise(g, node, ops.frexp_mantissa, x, meta=mantissa)
    e = pointwise(g, node, ops.frexp_exponent, x, meta=exponent, compute=cdtype)
    return m, e


@register_lowering(aten.ldexp)
def ldexp(g: LoweringContext, node: Node, x: Any, other: Any) -> Any:
    # eager: x * pow(2, other); 2**e of an integer e is exact in exp2
    return pointwise(g, node, lambda a, e: ops.mul(a, ops.exp2(e)), x, other)


@register_lowering(aten.angle)
def angle(g: LoweringContext, node: Node, x: Any) -> Any:
    # real input: pi below zero, 0 otherwise, NaN stays NaN
    cdtype = compute_dtype(out_meta(node).dtype, [x])

    def fn(v: Any) -> Any:
        pi, zero = ops.constant(math.pi, cdtype), ops.constant(0.0, cdtype)
        return ops.where(ops.isnan(v), v, ops.where(ops.lt(v, zero), pi, zero))

    return pointwise(g, node, fn, x)


@register_lowering(aten.round.decimals)
def round_decimals(g: LoweringContext, node: Node, x: Any, decimals: int = 0) -> Any:
    # eager's kernel: nearbyint(x * 10^d) / 10^d, or for d < 0 nearbyint(x / 10^-d) * 10^-d
    scale = float(10 ** abs(decimals))
    cdtype = compute_dtype(out_meta(node).dtype, [x])

    def fn(v: Any) -> Any:
        s = ops.constant(scale, cdtype)
        if decimals >= 0:
            return ops.truediv(ops.round(ops.mul(v, s)), s)
        return ops.mul(ops.round(ops.truediv(v, s)), s)

    return pointwise(g, node, fn, x)
