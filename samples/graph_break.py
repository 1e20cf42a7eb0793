"""Graph break: a print() splits the function into two compiled graphs

Dynamo cannot put print() in a graph, so it compiles the ops before it as graph 0, runs the
print in plain Python, and compiles the ops after it as graph 1. The capture stage reports
the break with its reason and line.
"""

import torch


@torch.compile
def two_pieces(x):
    y = torch.sin(x) * 2.0
    print("graph break: Dynamo cannot trace print()")
    return torch.cos(y) + 1.0


x = torch.randn(4096)
out = two_pieces(x)
print(out.shape)
