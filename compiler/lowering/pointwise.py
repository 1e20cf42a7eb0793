"""Pointwise lowerings: most are one line, `fn` applied elementwise with broadcasting.

Inputs are loaded at the broadcast index, converted to the compute dtype (float32 for
16-bit floats, as eager's kernels do internally), combined, and converted to the output
dtype that the FX node's metadata records.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx import Node

from kernelscope.compiler.devices import CPU
from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops, promote_types
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.registry import (
    LoweringFn,
    aten,
    prims,
    register_lowering,
    register_lowering_by_name,
)

LOW_PRECISION = (torch.float16, torch.bfloat16)


def upcast(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in LOW_PRECISION else dtype


def cast(value: Any, have: torch.dtype, want: torch.dtype) -> Any:
    """`value` (of dtype `have`) as `want`: a conversion only where the two differ."""
    return ops.to_dtype(value, want) if have != want else value


def compute_dtype(out: torch.dtype, args: Sequence[Any]) -> torch.dtype:
    if out != torch.bool:
        return upcast(out)
    tensors = [a.dtype for a in args if isinstance(a, TensorValue)]
    dtype = tensors[0] if tensors else torch.float32
    for d in tensors[1:]:
        dtype = promote_types(dtype, d)
    if any(isinstance(a, float) for a in args) and not dtype.is_floating_point:
        dtype = torch.float32
    return upcast(dtype)


def broadcast_loader(
    value: Any, size: Sequence[int], dtype: torch.dtype
) -> Callable[[Index], Any]:
    """Loader of `value` at an index of the broadcast output shape `size`."""
    if not isinstance(value, TensorValue):
        return lambda idx: ops.constant(value, dtype)
    load, vsize = value.loader(), value.size
    lead = len(size) - len(vsize)

    def loader(idx: Index) -> Any:
        sub = [0 if vsize[k] == 1 and size[lead + k] != 1 else idx[lead + k]
               for k in range(len(vsize))]
        return cast(load(sub), value.dtype, dtype)

    return loader


def pointwise(g: LoweringContext, node: Node, fn: Callable[..., Any], *args: Any,
              dtype: torch.dtype | None = None, meta: Any = None,
              compute: torch.dtype | None = None) -> Any:
    """Build a Lazy value computing fn(*loaded args) at each output index (`meta`: the
    output's fake tensor when the node has several; `compute`: the dtype args load as)."""
    meta = meta if meta is not None else out_meta(node)
    size = tuple(meta.shape)
    out_dtype = dtype or meta.dtype
    cdtype = compute or compute_dtype(out_dtype, args)
    loaders = [broadcast_loader(a, size, cdtype) for a in args]

    def inner_fn(idx: Index) -> Any:
        return cast(fn(*[ld(idx) for ld in loaders]), cdtype, out_dtype)

    return g.lazy(node, inner_fn, size, out_dtype, [a for a in args if isinstance(a, TensorValue)])


def _register_simple(op_name: str, *targets: Any) -> None:
    def lowering(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
        return pointwise(g, node, lambda *v: getattr(ops, op_name)(*v), *args)

    register_lowering(*targets)(lowering)


for _name in ("exp exp2 expm1 log log1p log2 sqrt rsqrt sin cos tan tanh sigmoid erf floor "
              "ceil trunc reciprocal sign neg abs asin acos atan sinh cosh maximum minimum "
              "atan2 eq ne lt le gt ge bitwise_and bitwise_or bitwise_xor isnan isinf fmod "
              "relu").split():
    _register_simple(_name, getattr(aten, _name))
_register_simple("round", aten.round.default)
_register_simple("mul", aten.mul, prims.mul)
_register_simple("truediv", aten.div.Tensor, aten.div.Scalar, aten.true_divide, prims.div)


def _logical(name: str) -> LoweringFn:
    def lowering(g: LoweringContext, node: Node, *args: Any) -> Any:
        # Operands are truth values first: logical_xor(True, 2.0) is False, not 1 != 2.
        meta = out_meta(node)
        size, out = tuple(meta.shape), meta.dtype
        loaders = [broadcast_loader(a, size, torch.bool) for a in args]

        def inner_fn(idx: Index) -> Any:
            return cast(getattr(ops, name)(*[ld(idx) for ld in loaders]), torch.bool, out)

        return g.lazy(node, inner_fn, size, out, [a for a in args if isinstance(a, TensorValue)])

    return lowering


for _name in ("logical_and logical_or logical_xor logical_not").split():
    register_lowering(getattr(aten, _name))(_logical(_name))


@register_lowering(aten.bitwise_not)
def bitwise_not(g: LoweringContext, node: Node, a: Any) -> Any:
    if a.dtype == torch.bool:  # ~ on a C++ bool promotes to int: ~true == -2, still true
        return _logical("logical_not")(g, node, a)
    return pointwise(g, node, ops.bitwise_not, a)


@register_lowering(aten.add, prims.add)
def add(g: LoweringContext, node: Node, a: Any, b: Any, alpha: Any = 1) -> Any:
    if alpha != 1:
        return pointwise(g, node, lambda x, y, s: ops.add(x, ops.mul(y, s)), a, b, alpha)
    return pointwise(g, node, ops.add, a, b)


@register_lowering_by_name("prims::fma")
def fma(g: LoweringContext, node: Node, a: Any, b: Any, c: Any) -> Any:
    """a * b + c (addcmul/addcdiv decompose to it once Inductor is loaded, which defines
    prims.fma). A GPU contracts the two into one fused multiply-add, as eager's kernel
    does; the C++ compiler may or may not."""
    return pointwise(g, node, lambda x, y, z: ops.add(ops.mul(x, y), z), a, b, c)


@register_lowering(aten.sub, prims.sub)
def sub(g: LoweringContext, node: Node, a: Any, b: Any, alpha: Any = 1) -> Any:
    if alpha != 1:
        return pointwise(g, node, lambda x, y, s: ops.sub(x, ops.mul(y, s)), a, b, alpha)
    return pointwise(g, node, ops.sub, a, b)


@register_lowering(aten.rsub)
def rsub(g: LoweringContext, node: Node, a: Any, b: Any, alpha: Any = 1) -> Any:
    return sub(g, node, b, a, alpha)


@register_lowering(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(g: LoweringContext, node: Node, a: Any, b: Any, rounding_mode: str | None = None
            ) -> Any:
    if rounding_mode == "floor":
        if not out_meta(node).dtype.is_floating_point:
            return pointwise(g, node, ops.floordiv, a, b)
        return pointwise(g, node, lambda x, y: ops.floor(ops.truediv(x, y)), a, b)
    if rounding_mode == "trunc":
        if not out_meta(node).dtype.is_floating_point:
            return pointwise(g, node, _int_trunc_div, a, b)
        return pointwise(g, node, lambda x, y: ops.trunc(ops.truediv(x, y)), a, b)
    return pointwise(g, node, ops.truediv, a, b)


def _int_trunc_div(x: Any, y: Any) -> Any:
    """Integer division rounding toward zero, from floor division: one up where the
    remainder is non-zero and the signs differ."""
    q, r = ops.floordiv(x, y), ops.fmod(x, y)
    zero = ops.constant(0, torch.int64)
    fix = ops.logical_and(ops.ne(r, zero), ops.ne(ops.lt(r, zero), ops.lt(y, zero)))
    return ops.where(fix, ops.add(q, ops.constant(1, torch.int64)), q)


@register_lowering(aten.remainder)
def remainder(g: LoweringContext, node: Node, a: Any, b: Any) -> Any:
    # Python semantics: the result takes the sign of the divisor.
    def fn(x: Any, y: Any) -> Any:
        r = ops.fmod(x, y)
        zero = ops.constant(0, torch.float32)
        fix = ops.logical_and(ops.ne(r, zero), ops.ne(ops.lt(r, zero), ops.lt(y, zero)))
        return ops.where(fix, ops.add(r, y), r)

    return pointwise(g, node, fn, a, b)


@register_lowering(aten.pow)
def pow_(g: LoweringContext, node: Node, a: Any, b: Any) -> Any:
    out = out_meta(node).dtype
    if not out.is_floating_point:
        return _int_pow(g, node, a, b)
    if isinstance(b, (int, float)) and not isinstance(b, bool):
        if b == 2:
            return pointwise(g, node, lambda x: ops.mul(x, x), a)
        if b == 3:
            return pointwise(g, node, lambda x: ops.mul(ops.mul(x, x), x), a)
        if b == 0.5:
            return pointwise(g, node, ops.sqrt, a)
        if b == -0.5:
            return pointwise(g, node, ops.rsqrt, a)
        if b == -1:
            return pointwise(g, node, ops.reciprocal, a)
        if b == 1:
            return pointwise(g, node, lambda x: x, a)
    return pointwise(g, node, ops.pow, a, b)


def _int_pow(g: LoweringContext, node: Node, a: Any, b: Any) -> Any:
    """Integer pow: exact repeated multiplication for small constant exponents; the rest
    (tensor exponents) is an integer `pow`, which backends compute by squaring (one that
    cannot is refused at lowering, and ATen computes the node)."""
    if isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 16 and \
            isinstance(a, TensorValue):
        out = out_meta(node).dtype

        def fn(x: Any) -> Any:
            if b == 0:
                return ops.constant(1, out)
            result, base, e = None, x, b
            while e:  # square-and-multiply
                if e & 1:
                    result = base if result is None else ops.mul(result, base)
                e >>= 1
                if e:
                    base = ops.mul(base, base)
            return result

        return pointwise(g, node, fn, a)
    return pointwise(g, node, ops.pow, a, b)


@register_lowering(aten.clamp)
def clamp(g: LoweringContext, node: Node, a: Any, lo: Any = None, hi: Any = None) -> Any:
    return _clamp(g, node, a, lo, hi)


@register_lowering(aten.clamp_min)
def clamp_min(g: LoweringContext, node: Node, a: Any, lo: Any) -> Any:
    return _clamp(g, node, a, lo, None)


@register_lowering(aten.clamp_max)
def clamp_max(g: LoweringContext, node: Node, a: Any, hi: Any) -> Any:
    return _clamp(g, node, a, None, hi)


def _clamp(g: LoweringContext, node: Node, a: Any, lo: Any, hi: Any) -> Any:
    args = [a] + [v for v in (lo, hi) if v is not None]

    def fn(x: Any, *bounds: Any) -> Any:
        it = iter(bounds)
        if lo is not None:
            x = ops.maximum(x, next(it))
        if hi is not None:
            x = ops.minimum(x, next(it))
        return x

    return pointwise(g, node, fn, *args)


@register_lowering(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf,
                   aten.where.Scalar, prims.where)
def where(g: LoweringContext, node: Node, cond: Any, a: Any, b: Any) -> Any:
    meta = out_meta(node)
    size, out = tuple(meta.shape), meta.dtype
    cd = upcast(out)
    lc = broadcast_loader(cond, size, torch.bool)
    la, lb = broadcast_loader(a, size, cd), broadcast_loader(b, size, cd)

    def inner_fn(idx: Index) -> Any:
        return cast(ops.where(lc(idx), la(idx), lb(idx)), cd, out)

    return g.lazy(node, inner_fn, size, out,
                  [v for v in (cond, a, b) if isinstance(v, TensorValue)])


def _copy_of(g: LoweringContext, node: Node, op: Any, src: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any]) -> Any:
    """`src`'s values in the node's shape and dtype; ATen copies between devices."""
    meta = out_meta(node)
    if isinstance(meta, torch.Tensor) and meta.device.type != _dev(src):
        return g.extern(node, op, args, kwargs, fallback=True, reason="copy between devices")
    return pointwise(g, node, lambda x: x, src)


def _register_copy(op: Any) -> None:
    @register_lowering(op)
    def copy_like(g: LoweringContext, node: Node, a: Any, *args: Any, **kwargs: Any) -> Any:
        return _copy_of(g, node, op, a, (a, *args), kwargs)


for _op in (aten._to_copy, aten.clone, aten.lift_fresh_copy, prims.convert_element_type,
            aten.contiguous):
    _register_copy(_op)


@register_lowering(aten.alias, aten.detach)
def same_value(g: LoweringContext, node: Node, a: Any, *args: Any, **kwargs: Any) -> Any:
    """A view of `a` with every element where it was: `a` itself (as a copy, a saved
    activation that is one, as attention's output, was stored twice)."""
    return a


@register_lowering(aten.copy.default)
def copy(g: LoweringContext, node: Node, a: Any, src: Any, *args: Any, **kwargs: Any) -> Any:
    # copy(self, src): the result is src's values in self's shape
    return _copy_of(g, node, aten.copy.default, src, (a, src, *args), kwargs)


def _dev(v: Any) -> str:
    return v.device if isinstance(v, TensorValue) else CPU


@register_lowering(aten.fill.Scalar)
def fill(g: LoweringContext, node: Node, a: Any, value: Any) -> Any:
    return pointwise(g, node, lambda: ops.constant(value, upcast(out_meta(node).dtype)))


@register_lowering(aten.gelu)
def gelu(g: LoweringContext, node: Node, a: Any, approximate: str = "none") -> Any:
    def fn(x: Any) -> Any:
        c = lambda v: ops.constant(v, torch.float32)  # noqa: E731
        if approximate == "tanh":
            inner = ops.mul(c(math.sqrt(2 / math.pi)),
                            ops.add(x, ops.mul(c(0.044715), ops.mul(ops.mul(x, x), x))))
            return ops.mul(ops.mul(c(0.5), x), ops.add(c(1.0), ops.tanh(inner)))
        return ops.mul(ops.mul(c(0.5), x),
                       ops.add(c(1.0), ops.erf(ops.mul(x, c(1 / math.sqrt(2))))))

    return pointwise(g, node, fn, a)
