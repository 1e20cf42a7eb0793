"""Our decomposition table: core ATen, and below it where that lets us fuse.

layer_norm, batch_norm, gelu, silu, var_mean, ... are decomposed
into the pointwise ops and reductions they are made of, so the scheduler can fuse their
pieces with their neighbours. Matrix products, convolutions and attention stay whole
(they go to vendor libraries as extern kernels), and so do softmax and log_softmax
(lowering/softmax.py reads a long row once for its logsumexp where the backend can).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch._decomp import core_aten_decompositions, get_decompositions
from torch._ops import OperatorBase, OpOverloadPacket

aten = torch.ops.aten

BELOW_CORE: list[OperatorBase | OpOverloadPacket] = [
    aten.native_layer_norm,
    aten.native_batch_norm,
    aten._native_batch_norm_legit,
    aten._native_batch_norm_legit_no_training,
    aten._native_batch_norm_legit_functional,
    aten.native_group_norm,
    aten.gelu,
    aten.silu,
    aten.hardtanh,
    aten.hardswish,
    aten.hardsigmoid,
    aten.leaky_relu,
    aten.elu,
    aten.softplus,
    aten.mish,
    aten.logsumexp,
    aten.std,
    aten.std_mean,
    aten.mse_loss,
    aten.nll_loss_forward,
    aten._log_softmax_backward_data,
    aten._softmax_backward_data,
    aten.native_layer_norm_backward,
    aten.gelu_backward,
    aten.threshold_backward,
    aten.sigmoid_backward,
    aten.tanh_backward,
    aten.silu_backward,
    aten.addcmul,
    aten.addcdiv,
    aten.lerp,
    aten.masked_fill,
    aten.max.dim,
    aten.min.dim,
    aten.embedding_dense_backward,
    # structural ops that decompose into indexing, views and reductions we lower
    aten.linalg_vector_norm,
    aten.dist,
    aten.addmv,
    aten.narrow_copy,
    aten.permute_copy,
    aten.as_strided_copy,
    aten.unbind_copy,
    aten.bucketize,
    aten.grid_sampler_2d,
    aten.slice_scatter,
    aten.new_empty_strided,
    aten._upsample_bilinear2d_aa,
    aten._batch_norm_with_update,  # what nn.functional.batch_norm in training becomes
    aten._batch_norm_with_update_functional,
]

# Core decompositions we undo: we lower these directly and better.
KEEP_WHOLE = [
    aten._softmax,  # lowering/softmax.py: one pass over long rows where the backend can
    aten._log_softmax,
    aten.addmm,
    aten.mm,
    aten.bmm,
    aten.convolution,
    # attention stays one fused op (flash / memory-efficient / the CPU flash kernel), in
    # inference and training, rather than two GEMMs and a softmax over (s x s) scores:
    # lowering/misc.py calls it, and its backward, as extern kernels
    aten.scaled_dot_product_attention,
    # Also for correctness: upstream's rule for the CPU op returns the attention weights
    # where the op returns its logsumexp (it is meant for export; Inductor excludes it).
    # Below autograd, the backward op (`..._for_cpu_backward`) read that (b, h, l, s)
    # tensor as the (b, h, l) logsumexp: GPT-2's and BERT's gradients were off by ~2e3.
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten.embedding,
    aten.index_select,
    aten.gather,
    aten.clamp_min,
    aten.clamp_max,
    aten.rsqrt,
    aten.var_mean,
]


def _addbmm(self: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *,
            beta: Any = 1, alpha: Any = 1) -> torch.Tensor:
    """beta * self + alpha * sum_b batch1[b] @ batch2[b], the sum over b folded into
    one matrix product: (n, b*k) @ (b*k, p). beta == 0 ignores self (NaNs included).

    float16 and bfloat16 are computed in float32 and rounded once at the end. Eager adds
    one batch at a time (`result.addmm_` per batch, each rounded to the dtype), so no
    single order reproduces it; rounding the products, the scaling and the sum separately
    ends further from the float32 result than eager's. One rounding is never further than
    eager's last."""
    dtype = batch1.dtype
    low = dtype in (torch.float16, torch.bfloat16)
    if low:
        self, batch1, batch2 = self.float(), batch1.float(), batch2.float()
    b, n, k = batch1.shape
    p = batch2.shape[2]
    out = torch.mm(batch1.transpose(0, 1).reshape(n, b * k), batch2.reshape(b * k, p))
    if alpha != 1:
        out = out * alpha
    if beta == 0:
        out = out.expand(torch.broadcast_shapes(self.shape, out.shape)).clone()
    else:
        out = out + (self if beta == 1 else self * beta)
    return out.to(dtype) if low else out


# Ours, where no decomposition exists upstream.
OWN = {aten.addbmm.default: _addbmm}


@functools.lru_cache(maxsize=1)
def decomposition_table() -> dict[Any, Any]:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(BELOW_CORE))
    table.update(OWN)
    for packet in KEEP_WHOLE:
        for name in packet.overloads():
            table.pop(getattr(packet, name), None)
    return table
