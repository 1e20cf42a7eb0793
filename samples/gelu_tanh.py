"""GELU (tanh approximation) by hand: seven ops, one kernel

A classic TorchInductor case study:

    gelu(x) ~= 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

Every multiply, add and the tanh become one expression tree over a single load of x.
"""

import math

import torch


@torch.compile
def gelu_approximate(x):
    sqrt_2_over_pi = math.sqrt(2.0 / math.pi)
    x_cubed = x * x * x
    inner = sqrt_2_over_pi * (x + 0.044715 * x_cubed)
    tanh_inner = torch.tanh(inner)
    result = 0.5 * x * (1.0 + tanh_inner)
    return result


x = torch.randn(65536)
y = gelu_approximate(x)
print(y.shape)
