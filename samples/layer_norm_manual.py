"""LayerNorm by hand: mean and variance reductions with a fused epilogue

A classic TorchInductor case study: mean, var(unbiased=False), normalise, scale and shift
over the last dimension of a (128, 512) input. Inductor makes it one or two kernels; the
reductions and the pointwise epilogue read the same rows.
"""

import torch


@torch.compile
def layer_norm_manual(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    x_normalized = (x - mean) / torch.sqrt(var + eps)
    return x_normalized * weight + bias


x = torch.randn(128, 512)
weight = torch.randn(512)
bias = torch.randn(512)
out = layer_norm_manual(x, weight, bias)
print(out.shape)
