"""softmax and log_softmax, lowered whole (they are kept out of the decomposition table).

Where the backend has the one-pass `logsumexp` reduction (Triton) and the row is longer
than a persistent reduction holds in registers, the row is read once for its logsumexp L
and once more for the result (softmax = exp(x - L), log_softmax = x - L), not three times
as the decomposed form reads it. Rows a persistent reduction holds take max and sum in
registers, and log_softmax there is eager's (x - max) - log(sum): x - L rounds L, which
for large logits is off by more than the tolerance near the row's max. Otherwise softmax
is torch's decomposition, exp(x - max) / sum(exp(x - max)), in float32 for 16-bit inputs;
where the backend says so (C++), exp(x - max) * (1 / sum), as eager's CPU kernel does.
"""

from __future__ import annotations

from typing import Any

import sympy
from torch.fx import Node

from kernelscope.compiler.features import Feature
from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.pointwise import cast, upcast
from kernelscope.compiler.lowering.reductions import reduce
from kernelscope.compiler.lowering.registry import aten, register_lowering


def _row(x: TensorValue, dim: int) -> tuple[int, int]:
    nd = len(x.size)
    d = dim % nd if nd else 0
    return d, (x.size[d] if nd else 1)


def _lowered(g: LoweringContext, node: Node, x: TensorValue, dim: int, log: bool) -> Any:
    out = out_meta(node).dtype
    cd = upcast(x.dtype)
    d, n = _row(x, dim)
    load = x.loader()

    def xv(idx: Index) -> Any:
        return cast(load(idx), x.dtype, cd)

    def at_row(idx: Index) -> list[Any]:
        return [sympy.Integer(0) if k == d else i for k, i in enumerate(idx)] if x.size \
            else list(idx)

    def finish(v: Any) -> Any:
        return cast(v, cd, out)

    online = g.online_softmax is not None and n > g.online_softmax
    if online and x.size:
        lse = reduce(g, node, x, [d], True, "logsumexp", cd, cd).loader()

        def result(idx: Index) -> Any:
            shifted = ops.sub(xv(idx), lse(at_row(idx)))
            return finish(shifted if log else ops.exp(shifted))

        return g.lazy(node, result, x.size, out, [x])
    top = reduce(g, node, x, [d] if x.size else [], True, "max", cd, cd).loader()

    def shifted(idx: Index) -> Any:
        return ops.sub(xv(idx), top(at_row(idx)))

    exp = g.lazy(node, lambda idx: ops.exp(shifted(idx)), x.size, cd, [x])
    total = reduce(g, node, exp, [d] if x.size else [], True, "sum", cd, cd).loader()

    reciprocal = Feature.SOFTMAX_RECIPROCAL in g.features and not log
    if reciprocal:
        g.notes.append(f"{node.name}: exp(x - max) * (1 / sum), "
                       "as eager's CPU kernel computes it (not exp / sum)")

    def plain(idx: Index) -> Any:
        if log:
            return finish(ops.sub(shifted(idx), ops.log(total(at_row(idx)))))
        e, s = ops.exp(shifted(idx)), total(at_row(idx))
        return finish(ops.mul(e, ops.reciprocal(s)) if reciprocal else ops.truediv(e, s))

    return g.lazy(node, plain, x.size, out, [x])


@register_lowering(aten._softmax)
def softmax(g: LoweringContext, node: Node, x: TensorValue, dim: int, half_to_float: bool = False
           ) -> Any:
    return _lowered(g, node, x, dim, log=False)


@register_lowering(aten._log_softmax)
def log_softmax(g: LoweringContext, node: Node, x: TensorValue, dim: int,
                half_to_float: bool = False) -> Any:
    return _lowered(g, node, x, dim, log=True)
