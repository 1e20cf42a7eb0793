"""A training step through the backend: loss, every gradient, every parameter after AdamW.

Regression: the backward graph is compiled lazily inside `loss.backward()`; Dynamo was still
watching frames there and traced the compiled wrapper itself (its ctypes calls on data
pointers), so the first layer's weight gradient came back as garbage (up to 1e33).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from ks_helpers import compiled
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(32, 64)
        self.ln = nn.LayerNorm(64)
        self.l2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(F.gelu(self.ln(self.l1(x))))


def _pair() -> tuple[MLP, MLP]:
    torch.manual_seed(0)
    a, b = MLP(), MLP()
    b.load_state_dict(a.state_dict())
    return a, b


def _step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor,
          y: torch.Tensor) -> torch.Tensor:
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
def test_training_step_matches_eager_loss_grads_and_params(device: str) -> None:
    with torch.device(device):
        _training_steps()


def _training_steps() -> None:
    eager, ours = _pair()
    opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-2)
    x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
    step = compiled(_step)
    for _ in range(3):
        le = _step(eager, opt_e, x, y)
        lo = step(ours, opt_o, x, y)
        torch.testing.assert_close(lo, le, atol=1e-5, rtol=1e-5)
        for (name, pe), (_, po) in zip(eager.named_parameters(), ours.named_parameters()):
            assert po.grad is not None, name
            torch.testing.assert_close(po.grad, pe.grad, atol=1e-5, rtol=1e-4, msg=name)
        opt_e.step()
        opt_o.step()
        for (name, pe), (_, po) in zip(eager.named_parameters(), ours.named_parameters()):
            torch.testing.assert_close(po, pe, atol=1e-5, rtol=1e-4, msg=name)


def test_compiled_optimizer_step_matches_eager() -> None:
    eager, ours = _pair()
    opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-2)
    opt_o = torch.optim.AdamW(ours.parameters(), lr=1e-2)
    x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))

    def full_step(model: nn.Module, opt: torch.optim.Optimizer) -> torch.Tensor:
        loss = _step(model, opt, x, y)
        opt.step()
        return loss

    step = compiled(full_step)
    for _ in range(2):
        le, lo = full_step(eager, opt_e), step(ours, opt_o)
        torch.testing.assert_close(lo, le, atol=1e-5, rtol=1e-5)
    for (name, pe), (_, po) in zip(eager.named_parameters(), ours.named_parameters()):
        torch.testing.assert_close(po, pe, atol=1e-5, rtol=1e-4, msg=name)


def test_square_layer_norm_backward_does_not_fuse_row_and_column_sums() -> None:
    """Regression: in a 64x64 Linear -> LayerNorm backward, the column sums (weight and bias
    grads) and the row sums (the statistics) have the same 64 x 64 shape; fusing them made a
    column sum read other rows' statistics (the bias grad was off by ~40)."""
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(256, 64), nn.LayerNorm(64))
    ours = nn.Sequential(nn.Linear(256, 64), nn.LayerNorm(64))
    ours.load_state_dict(eager.state_dict())
    x, w = torch.randn(64, 256), torch.randn(64, 64)

    def step(model: nn.Module) -> torch.Tensor:
        loss = (model(x) * w).sum()
        loss.backward()
        return loss

    step(eager)
    compiled(step)(ours)
    for (name, pe), (_, po) in zip(eager.named_parameters(), ours.named_parameters()):
        torch.testing.assert_close(po.grad, pe.grad, atol=1e-4, rtol=1e-4, msg=name)
