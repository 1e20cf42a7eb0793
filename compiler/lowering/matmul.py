"""Matrix products: cuBLAS, with the operands padded where its fast kernels need alignment.

cuBLAS's tensor-core kernels want every leading dimension a multiple of 16 bytes; a
product with, say, 50257 output columns (GPT-2's vocabulary) gets a much slower unaligned
kernel (Inductor pads too). So on CUDA, for products large enough to pay for the
copy, the misaligned inner (K) and output (N) sizes are padded with zeros to the next
multiple: the weight is copied once per call into an aligned buffer (its dim order
kept, so a transposed weight stays transposed), the product runs on aligned sizes, and
the result is the product's first N columns, read lazily: a consumer fuses the slice into
its loads, and a graph output is copied to eager's contiguous strides. Zero padding along
K adds exact zeros to every sum, so the values are those of the unpadded product. The
decision shows in the buffers' reasons (the lowering event).

Where the graph's backend has GEMM templates (Triton), the product is a `MatmulTemplate`
(ir/template.py): the same extern call, which may become a Triton template with its
pointwise consumers fused as the epilogue once the choice is made after lowering.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import Node

from kernelscope.compiler.devices import CUDA
from kernelscope.compiler.features import Feature
from kernelscope.compiler.ir.indexing import contiguous_strides, dense_strides_like
from kernelscope.compiler.ir.nodes import (
    ExternKernel,
    Index,
    Layout,
    Stored,
    TensorArg,
    TensorValue,
)
from kernelscope.compiler.ir.opnames import op_short
from kernelscope.compiler.ir.ops import ops
from kernelscope.compiler.ir.template import MatmulTemplate, Operand
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import broadcast_loader, cast, upcast
from kernelscope.compiler.lowering.registry import aten, register_lowering

PAD_DEVICES = (CUDA,)  # where the product runs in cuBLAS
ALIGN_BYTES = 16  # cuBLAS's tensor-core kernels: leading dimensions in multiples of this
# Below this many multiply-adds the padding copies (and their launches) cost more than
# the unaligned kernel loses.
PAD_MIN_MACS = 1 << 27


@dataclass(frozen=True)
class PadPlan:
    k: int  # the inner size, padded
    n: int  # the output's columns, padded
    why: str


def pad_plan(a: TensorValue, b: TensorValue) -> PadPlan | None:
    """How to pad a @ b (2-D, [M, K] x [K, N]) for cuBLAS, or None to leave it."""
    if a.device not in PAD_DEVICES or b.device != a.device or a.dtype != b.dtype:
        return None
    if a.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return None
    (m, k), (_, n) = a.size, b.size
    if m * n * k < PAD_MIN_MACS:
        return None
    align = ALIGN_BYTES // a.dtype.itemsize
    kp, np_ = -(-k // align) * align, -(-n // align) * align
    if (kp, np_) == (k, n):
        return None
    what = [f"{name} {old} -> {new}" for name, old, new in (("K", k, kp), ("N", n, np_))
            if old != new]
    return PadPlan(kp, np_, f"padded for cuBLAS's aligned kernels ({', '.join(what)}; "
                   f"multiples of {align} {a.dtype}: lowering/matmul.py)")


def _stride_of(x: TensorValue) -> Sequence[int]:
    return x.view.stride if isinstance(x, Stored) else contiguous_strides(x.size)


def _zero_padded(g: LoweringContext, node: Node, x: TensorValue, size: tuple[int, int], why: str
                ) -> TensorValue:
    """x (2-D) in the top-left corner of a zero tensor of `size`, stored in x's dim order."""
    if tuple(x.size) == size:
        return x
    load, (r, c) = x.loader(), x.size

    def inner(idx: Index) -> Any:
        inside = ops.logical_and(
            ops.lt(ops.index_expr(idx[0], torch.int64), ops.constant(r, torch.int64)),
            ops.lt(ops.index_expr(idx[1], torch.int64), ops.constant(c, torch.int64)))
        return ops.where(inside, ops.masked(inside, lambda: load(idx), 0.0),
                         ops.constant(0.0, x.dtype))

    padded = g.lazy(node, inner, size, x.dtype, [x])
    return g.realize(padded, f"{why}: operand {list(x.size)} -> {list(size)}",
                     stride=dense_strides_like(size, _stride_of(x)))


TEMPLATE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
INT32_MAX = (1 << 31) - 1  # the template's index arithmetic is 32-bit
MAX_GRID_Y = 65535  # CUDA's limit on a grid's second dimension (the template's batch)


def _view(arg: TensorArg, like: Layout) -> Layout:
    return Layout(like.device, like.dtype, arg.size, arg.stride, arg.offset)


def _fits_int32(lay: Layout) -> bool:
    return lay.storage_numel() <= INT32_MAX


def offer_template(g: LoweringContext, result: Stored, a: TensorValue, b: TensorValue) -> Stored:
    """The extern product `result` as a MatmulTemplate where the graph takes templates
    and the template can compute it (float16 / bfloat16 / float32, one dtype, 32-bit
    indices, a batch the grid holds); else `result` unchanged."""
    ext = result.buffer
    if Feature.MATMUL_TEMPLATES not in g.features or not isinstance(ext, ExternKernel) or \
            a.dtype != b.dtype or a.dtype not in TEMPLATE_DTYPES or ext.dtype != a.dtype:
        return result
    ta, tb = ext.args[0], ext.args[1]
    va = _view(ta, Layout(ext.device, a.dtype, (), ()))
    vb = _view(tb, Layout(ext.device, b.dtype, (), ()))
    if not all(_fits_int32(v) for v in (va, vb, ext.layout)):
        return result
    if len(ext.layout.size) == 3 and ext.layout.size[0] > MAX_GRID_Y:
        return result  # the batch is the grid's second dimension
    shape = " @ ".join("x".join(map(str, t.size)) for t in (ta, tb))
    tem = MatmulTemplate(ext.name, ext.layout, ext.origins, ext.op, ext.args, ext.kwargs,
                         ext.outputs, ext.fallback, a=Operand(ta.name, va),
                         b=Operand(tb.name, vb),
                         summary=f"{op_short(ext.op)} {shape} {str(a.dtype)[6:]}")
    g.buffers[g.buffers.index(ext)] = tem
    return Stored(tem, result.view)


def product(g: LoweringContext, node: Node, a: TensorValue, b: TensorValue) -> TensorValue:
    """a @ b for the current node, in cuBLAS (padded where `pad_plan` says), or a GEMM
    template (`offer_template`)."""
    plan = pad_plan(a, b) if len(a.size) == 2 and len(b.size) == 2 else None
    if plan is None:
        op = aten.mm.default if len(a.size) == 2 else aten.bmm.default
        return offer_template(g, g.extern(node, op, (a, b), {}, fallback=False), a, b)
    (m, _k), (_, n) = a.size, b.size
    ap = _zero_padded(g, node, a, (m, plan.k), plan.why)
    bp = _zero_padded(g, node, b, (plan.k, plan.n), plan.why)
    full = g.extern(node, aten.mm.default, (ap, bp), {}, fallback=False, out_size=(m, plan.n))
    load = full.loader()
    return g.lazy(node, lambda idx: load(idx), (m, n), a.dtype, [full])


@register_lowering(aten.mm)
def mm(g: LoweringContext, node: Node, a: Any, b: Any) -> Any:
    return product(g, node, a, b)


@register_lowering(aten.bmm)
def bmm(g: LoweringContext, node: Node, a: Any, b: Any) -> Any:
    return product(g, node, a, b)


@register_lowering(aten.addmm)
def addmm(g: LoweringContext, node: Node, bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1
         ) -> Any:
    """mm in cuBLAS; the bias add stays lazy so it fuses with whatever follows.

    In float16/bfloat16 eager adds the bias inside the GEMM and rounds once, and what
    follows reads that rounded value (F.gelu(F.linear(x, w, b)): the GELU's input is
    bf16). A lazy add rounds the rounded product plus the bias a second time: where no
    GEMM template (whose epilogue adds the bias to the float accumulator) is offered,
    ATen's addmm computes it."""
    meta = out_meta(node)
    if upcast(meta.dtype) != meta.dtype and pad_plan(a, b) is None and \
            Feature.MATMUL_TEMPLATES not in g.features:
        return g.extern(node, aten.addmm.default, (bias, a, b), {"beta": beta, "alpha": alpha},
                        fallback=False)
    saved = node.meta.get("val")
    prod = product(g, node, a, b)
    node.meta["val"] = saved
    size, dtype = tuple(meta.shape), meta.dtype
    cd = upcast(dtype)
    lb, lp = broadcast_loader(bias, size, cd), broadcast_loader(prod, size, cd)

    def inner(idx: Index) -> Any:
        p = lp(idx)
        if alpha != 1:
            p = ops.mul(p, ops.constant(alpha, cd))
        bv = lb(idx)
        if beta != 1:
            bv = ops.mul(bv, ops.constant(beta, cd))
        return cast(ops.add(p, bv), cd, dtype)

    return g.lazy(node, inner, size, dtype, [bias, prod])
