"""Full sum: many inputs, one output

With a single output there is no parallelism across outputs, so a long reduction is split:
a first kernel sums chunks into partial results, a second sums the partials.
"""

import torch


def full_sum(x):
    return x.sum()


example_inputs = (torch.randn(256, 256),)

if __name__ == "__main__":
    print(full_sum(*example_inputs).shape)
