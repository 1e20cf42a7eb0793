"""Gradients the OpInfo gradient sweep found wrong (tests/opinfo/grad_harness.py), one
small function each: outputs and every input gradient, compiled against eager.

Each case is a regression test: it failed before the fix its comment names.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from ks_helpers import compiled


def _normalize_p1(x: torch.Tensor) -> torch.Tensor:
    # The forward saves `expand(clamp_min(norm))`, a stride-0 view, for the backward;
    # it was returned contiguous while the backward was traced (and compiled) for the
    # view's strides: the backward read the wrong elements (lowering/graph.py _output).
    return F.normalize(x, p=1.0, dim=2)


def _saved_slice(x: torch.Tensor) -> torch.Tensor:
    # The same rule for a saved activation with gaps between its rows (a slice).
    y = torch.sin(x)[:, :3]
    return y * y


CASES: dict[str, tuple[Callable[..., torch.Tensor], list[tuple[int, ...]]]] = {
    "normalize_p1_saved_expand": (_normalize_p1, [(2, 1, 4, 5)]),
    "saved_slice_with_gaps": (_saved_slice, [(4, 6)]),
}


def _grads(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor]
           ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
    return out, list(torch.autograd.grad(out, leaves, g / g.norm()))


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_matches_eager(name: str) -> None:
    fn, shapes = CASES[name]
    gen = torch.Generator().manual_seed(0)
    inputs = [torch.randn(s, generator=gen) for s in shapes]
    expected, expected_grads = _grads(fn, inputs)
    actual, actual_grads = _grads(compiled(fn, backend="cpp"), inputs)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert len(actual_grads) == len(expected_grads)
    for a, e in zip(actual_grads, expected_grads):
        torch.testing.assert_close(a, e, atol=1e-5, rtol=1e-5)
