"""Pairwise distances: `_cdist_forward` as one reduction over the feature dim.

out[b, i, j] = (sum_m |x1[b, i, m] - x2[b, j, m]|^p)^(1/p), with eager's special cases:
p = 0 counts the differing features, p = 1 sums, p = 2 is a square root, p = inf takes
the largest difference (a NaN wins). Where eager computes Euclidean distances through a
matrix product instead (more than 25 rows, or compute_mode asks for it) its rounding is
that of the product, so those go to ATen with that reason.
"""

from __future__ import annotations

from typing import Any

from torch.fx import Node

from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import cast, upcast
from kernelscope.compiler.lowering.reductions import _nan_aware, reduce
from kernelscope.compiler.lowering.registry import aten, register_lowering

MM_ROWS = 25  # eager's cdist uses the matrix-product form above this many rows


@register_lowering(aten._cdist_forward)
def cdist(g: LoweringContext, node: Node, x1: TensorValue, x2: TensorValue, p: float,
          compute_mode: int | None = None) -> Any:
    meta = out_meta(node)
    rows1, rows2 = x1.size[-2], x2.size[-2]
    by_mm = p == 2 and (compute_mode == 1 or (compute_mode in (None, 0) and
                                              (rows1 > MM_ROWS or rows2 > MM_ROWS)))
    if by_mm:
        return g.extern(node, node.target, (x1, x2, p, compute_mode), {}, fallback=True,
                        reason="Euclidean cdist by matrix product (eager's rounding): ATen")
    out = meta.dtype
    cd = upcast(out)
    size = list(meta.shape)
    nb = len(size) - 2
    m = x1.size[-1]
    l1, l2 = x1.loader(), x2.loader()

    def at(t: TensorValue, batch: Index, row: Any, k: Any) -> list[Any]:
        lead = nb - (len(t.size) - 2)
        b = [0 if t.size[q] == 1 else batch[lead + q] for q in range(len(t.size) - 2)]
        return b + [row, k]

    def diff(idx: Index) -> Any:
        batch, i, j, k = idx[:nb], idx[nb], idx[nb + 1], idx[nb + 2]
        a, b = l1(at(x1, batch, i, k)), l2(at(x2, batch, j, k))
        a, b = cast(a, x1.dtype, cd), cast(b, x2.dtype, cd)
        d = ops.abs(ops.sub(a, b))
        if p == 0:
            return ops.to_dtype(ops.ne(d, ops.constant(0.0, cd)), cd)
        if p in (1, float("inf")):
            return d
        if p == 2:
            return ops.mul(d, d)
        return ops.pow(d, ops.constant(p, cd))

    terms = g.lazy(node, diff, size + [m], cd, [x1, x2])
    if p == float("inf"):
        return _nan_aware(g, node, terms, [nb + 2], False, "max", out)
    total = reduce(g, node, terms, [nb + 2], False, "sum", cd, cd)
    if p in (0, 1):
        return total if cd == out else g.lazy(node,
            lambda idx: ops.to_dtype(total.loader()(idx), out), size, out, [total])
    lt = total.loader()

    def root(idx: Index) -> Any:
        v = lt(idx)
        return cast(ops.sqrt(v) if p == 2 else ops.pow(v, ops.constant(1.0 / p, cd)), cd, out)

    return g.lazy(node, root, size, out, [total])

