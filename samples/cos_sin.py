"""Cos then sin: a chain of pointwise ops fused into one kernel

From the torch.compile getting-started guide: `b = sin(cos(x))` reads x once and writes b
once; the intermediate `a` lives only in registers.
"""

import torch


def fn(x):
    a = torch.cos(x)
    b = torch.sin(a)
    return b


new_fn = torch.compile(fn)
input_tensor = torch.randn(10000)
out = new_fn(input_tensor)
print(out.shape)
