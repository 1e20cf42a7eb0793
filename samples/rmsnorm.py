"""RMSNorm: a mean of squares, a reciprocal square root and a scale in one kernel

x * rsqrt(mean(x^2) + eps) * weight. The square is a prologue fused into the reduction;
the normalise-and-scale epilogue reads the same row again within the same kernel.
"""

import torch


def rms_norm(x, weight, eps: float = 1e-6):
    variance = x.pow(2).mean(dim=-1, keepdim=True)
    return x * torch.rsqrt(variance + eps) * weight


example_inputs = (torch.randn(128, 512), torch.randn(512))

if __name__ == "__main__":
    print(rms_norm(*example_inputs).shape)
