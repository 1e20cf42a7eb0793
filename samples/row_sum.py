"""Row sum: reduce each row of a (128, 512) matrix to one number

The reduced dimension is contiguous, so each program loads one row with stride 1 and sums
it in registers: a persistent reduction.
"""

import torch


def row_sum(x):
    return x.sum(dim=1)


example_inputs = (torch.randn(128, 512),)

if __name__ == "__main__":
    print(row_sum(*example_inputs).shape)
