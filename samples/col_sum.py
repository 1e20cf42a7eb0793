"""Column sum: reduce over the first dimension, across rows

The reduced dimension has stride 512: each output reads a strided column. How the kernel
lays out its loads (and whether neighbouring outputs share a program) decides its speed.
"""

import torch


def col_sum(x):
    return x.sum(dim=0)


example_inputs = (torch.randn(128, 512),)

if __name__ == "__main__":
    print(col_sum(*example_inputs).shape)
