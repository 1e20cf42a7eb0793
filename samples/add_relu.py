"""Add + ReLU: two pointwise ops, one kernel

The first example of every TorchInductor walkthrough. Dynamo captures `add` and `relu`
as two ATen ops; lowering turns each into a Pointwise node, whose inner_fn together read
`maximum(load(x) + load(y), 0.0)`, and the scheduler fuses them: the sum never goes to
memory.
"""

import torch


@torch.compile
def model(x, y):
    z = x + y
    return z.relu()


x = torch.randn(64, 1024)
y = torch.randn(64, 1024)
out = model(x, y)
print(out.shape)
