"""Constants, iota, cat, padding, and the ops we deliberately hand to ATen (extern).

Matrix products and convolutions go to cuBLAS/cuDNN (or MKL/oneDNN on the CPU) through
ExternKernel; their bias and activation epilogues stay lazy so they fuse into the
pointwise kernel that follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.fx import Node

from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import cast, upcast
from kernelscope.compiler.lowering.reductions import reduce
from kernelscope.compiler.lowering.registry import aten, prims, register_lowering


def _filled(g: LoweringContext, node: Node, value: Any) -> Any:
    """A tensor of the node's shape and dtype, every element `value`."""
    meta = out_meta(node)
    dtype = meta.dtype
    return g.lazy(node, lambda idx: ops.constant(value, dtype), tuple(meta.shape), dtype)


# One lowering per op, each reading its fill value from its own signature.
@register_lowering(aten.zeros.default, aten.zeros_like, aten.new_zeros)
def zeros(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
    return _filled(g, node, 0)


@register_lowering(aten.ones.default, aten.ones_like, aten.new_ones)
def ones(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
    return _filled(g, node, 1)


@register_lowering(aten.full.default, prims.full)
def full(g: LoweringContext, node: Node, size: Any, fill_value: Any, **kwargs: Any) -> Any:
    return _filled(g, node, fill_value)


@register_lowering(aten.full_like)
def full_like(g: LoweringContext, node: Node, a: Any, fill_value: Any, **kwargs: Any) -> Any:
    return _filled(g, node, fill_value)


@register_lowering(aten.new_full)
def new_full(g: LoweringContext, node: Node, a: Any, size: Any, fill_value: Any, **kwargs: Any
            ) -> Any:
    return _filled(g, node, fill_value)


@register_lowering(aten.scalar_tensor)
def scalar_tensor(g: LoweringContext, node: Node, s: Any, **kwargs: Any) -> Any:
    return _filled(g, node, s)


@register_lowering(aten.empty.memory_format, aten.empty_strided, aten.empty_permuted,
                   aten.empty_like, aten.new_empty, aten.new_empty_strided)
def empty(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
    """Uninitialized memory: an allocation of the node's layout, no kernel."""
    return g.allocate(node, "empty: allocated, values unspecified (nothing to compute)")


@register_lowering(prims.iota)
def iota(g: LoweringContext, node: Node, length: Any, *, start: Any = 0, step: Any = 1,
         **kwargs: Any) -> Any:
    return _range(g, node, start, step)


@register_lowering(aten.arange.start_step, aten.arange.default, aten.arange.start)
def arange(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
    if len(args) >= 2:  # arange(start, end[, step])
        return _range(g, node, args[0], args[2] if len(args) > 2 else kwargs.get("step", 1))
    return _range(g, node, 0, 1)  # arange(end)


def _range(g: LoweringContext, node: Node, start: Any, step: Any) -> Any:
    meta = out_meta(node)
    dtype = meta.dtype

    def inner(idx: Index) -> Any:
        if dtype.is_floating_point or isinstance(start, float) or isinstance(step, float):
            i = ops.to_dtype(ops.index_expr(idx[0], torch.int64), dtype)
            return ops.add(ops.constant(start, dtype), ops.mul(i, ops.constant(step, dtype)))
        return ops.index_expr(start + step * idx[0], dtype)

    return g.lazy(node, inner, tuple(meta.shape), dtype)


@register_lowering(aten.cat)
def cat(g: LoweringContext, node: Node, tensors: Sequence[Any], dim: int = 0) -> Any:
    meta = out_meta(node)
    size = tuple(meta.shape)
    dim = dim + len(size) if dim < 0 else dim
    dtype = meta.dtype
    parts = [t for t in tensors if isinstance(t, TensorValue) and t.numel() > 0]
    offsets, acc = [], 0
    for t in parts:
        offsets.append(acc)
        acc += t.size[dim]
    loaders = [t.loader() for t in parts]

    def inner(idx: Index) -> Any:
        # Each part is read only inside its own segment [start, end) of `dim`: outside it
        # the shifted index points before or past that part's buffer.
        i = ops.index_expr(idx[dim], torch.int64)
        result = None
        for k in reversed(range(len(parts))):
            shifted = list(idx)
            shifted[dim] = idx[dim] - offsets[k]
            load = loaders[k]
            part_dtype = parts[k].dtype

            def body(load: Any = load, shifted: list[Any] = shifted, pd: Any = part_dtype) -> Any:
                return cast(load(shifted), pd, dtype)

            start, end = offsets[k], offsets[k] + parts[k].size[dim]
            conds = ([ops.ge(i, ops.constant(start, torch.int64))] if k > 0 else []) + \
                ([ops.lt(i, ops.constant(end, torch.int64))] if k < len(parts) - 1 else [])
            if not conds:
                result = body()
                continue
            inside = conds[0] if len(conds) == 1 else ops.logical_and(*conds)
            value = ops.masked(inside, body, 0)
            result = value if result is None else ops.where(inside, value, result)
        return result

    return g.lazy(node, inner, size, dtype, parts)


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(g: LoweringContext, node: Node, x: TensorValue, pad: Sequence[int],
                    value: float = 0.0) -> Any:
    meta = out_meta(node)
    size = tuple(meta.shape)
    nd = len(size)
    load = x.loader()
    pads = [(0, 0)] * nd
    for k in range(len(pad) // 2):
        pads[nd - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    dtype = meta.dtype

    def inner(idx: Index) -> Any:
        src, conds = [], []
        for k, (lo, _hi) in enumerate(pads):
            src.append(idx[k] - lo)
            if pads[k] != (0, 0):
                pos = ops.index_expr(idx[k] - lo, torch.int64)
                conds.append(ops.ge(pos, ops.constant(0, torch.int64)))
                conds.append(ops.lt(pos, ops.constant(x.size[k], torch.int64)))
        if not conds:
            return load(src)
        mask = conds[0]
        for c in conds[1:]:
            mask = ops.logical_and(mask, c)
        return ops.where(mask, ops.masked(mask, lambda: load(src), value),
                         ops.constant(value, dtype))

    return g.lazy(node, inner, size, dtype, [x])


# -- extern by design: vendor libraries do these best --------------------------------

# Fused attention and its backward: one kernel that never writes the (s x s) scores.
ATTENTION = tuple(getattr(aten, n) for n in (
    "_scaled_dot_product_flash_attention _scaled_dot_product_efficient_attention "
    "_scaled_dot_product_cudnn_attention _scaled_dot_product_flash_attention_for_cpu "
    "_scaled_dot_product_flash_attention_backward "
    "_scaled_dot_product_efficient_attention_backward "
    "_scaled_dot_product_cudnn_attention_backward "
    "_scaled_dot_product_flash_attention_for_cpu_backward").split())


# A grouped GEMM (a mixture of experts' per-expert products, rows grouped by offsets): a
# matrix product like bmm, with its own library kernel.
GROUPED_MM = tuple(getattr(aten, n) for n in ("_grouped_mm",) if hasattr(aten, n))


@register_lowering(aten._convolution, aten.baddbmm, *ATTENTION, *GROUPED_MM)
def vendor(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
    return g.extern(node, node.target, args, kwargs, fallback=False)


@register_lowering(aten._trilinear)
def trilinear(g: LoweringContext, node: Node, i1: Any, i2: Any, i3: Any, expand1: Sequence[int],
              expand2: Sequence[int], expand3: Sequence[int], sumdim: Sequence[int],
              unroll_dim: int = 1) -> Any:
    """sum over sumdim of i1 * i2 * i3, each unsqueezed at its expand dims (bilinear)."""
    meta = out_meta(node)
    ndim = len(i1.size) + len(expand1)
    full = [1] * ndim
    loaders = []
    for t, exp in ((i1, expand1), (i2, expand2), (i3, expand3)):
        kept = [d for d in range(ndim) if d not in exp]
        for d, s in zip(kept, t.size):
            full[d] = max(full[d], s)
        loaders.append((t.loader(), kept, t.size))
    dtype = meta.dtype
    cd = upcast(dtype)

    def product(idx: Index) -> Any:
        acc = None
        for load, kept, size in loaders:
            v = cast(load([0 if size[k] == 1 else idx[d] for k, d in enumerate(kept)]), dtype, cd)
            acc = v if acc is None else ops.mul(acc, v)
        return acc

    lazy = g.lazy(node, product, full, cd, [i1, i2, i3])
    return reduce(g, node, lazy, list(sumdim), len(meta.shape) == ndim, "sum", dtype, cd)
