"""Transposed add: x + y.t(), where one operand is read across its rows

y.t() is a view: lowering remaps the index (i, j) -> (j, i) instead of copying. One of the
two loads is then strided, which is why the Triton backend tiles this kernel in 2-D.
"""

import torch


def transposed_add(x, y):
    return x + y.t()


example_inputs = (torch.randn(256, 128), torch.randn(128, 256))

if __name__ == "__main__":
    print(transposed_add(*example_inputs).shape)
