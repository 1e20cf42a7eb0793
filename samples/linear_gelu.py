"""Linear + GELU: a matmul through the vendor library, the activation fused after it

A classic TorchInductor case study: F.linear runs as an extern kernel (cuBLAS on a GPU,
ATen on the CPU); the bias add and the tanh-approximated GELU become one pointwise kernel
over its output instead of writing and re-reading it for each op.
"""

import torch
import torch.nn.functional as F


@torch.compile
def fused_linear_gelu(x, weight, bias):
    out = F.linear(x, weight, bias)
    return F.gelu(out, approximate="tanh")


x = torch.randn(64, 256)
weight = torch.randn(512, 256) * 0.05
bias = torch.randn(512)
out = fused_linear_gelu(x, weight, bias)
print(out.shape)
