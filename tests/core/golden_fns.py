"""Functions whose generated code is kept as golden files (their line numbers appear in
the kernels' comments, so this file changes only when the goldens are regenerated)."""

import torch


def _add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    z = x + y
    return z.relu()


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def _transposed_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y.t()
