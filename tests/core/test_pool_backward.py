"""Max pool backward as one pointwise value over the few outputs whose windows cover each
input (lowering/pooling.py `_windowed_backward`): ResNet's 3x3 stride-2 pool at 64x112x112
was too costly for the dense form (a candidate per output of the plane) and ran on ATen.
Gradients against eager with ATen fallback off (so the lowering itself is what runs),
C++ backend; the Triton interpreter runs it inside the convnet training cases
(test_train_layout.py)."""

from __future__ import annotations

import tempfile
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from kernelscope import compiler

CASES = [  # input shape, kernel, stride, padding, ceil_mode
    ((2, 3, 9, 9), 3, 2, 1, False),  # ResNet's stem pool
    ((2, 3, 8, 8), 2, 2, 0, False),
    ((1, 2, 7, 6), 3, 1, 1, False),  # 9 candidates per input
    ((2, 3, 9, 10), 3, 2, 0, True),  # ceil mode: a partial last window
    ((2, 4, 11, 11), (3, 2), (2, 1), (1, 0), True),
    ((1, 2, 5, 6, 7), 3, 2, 1, False),  # 3-D
    ((1, 8, 64, 64), 3, 2, 1, False),  # the dense form would cost > 2**24: was ATen
]


def _grads(fn: Any, x: torch.Tensor, compiled: bool) -> torch.Tensor:
    x = x.clone().requires_grad_()
    if compiled:
        torch._dynamo.reset()
        fn = torch.compile(fn, backend=lambda gm, ex: compiler.backend(gm, ex, options={
            "backend": "cpp", "fallback": False, "cache_dir": tempfile.mkdtemp()}))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn(x).backward()
    eagerly = [str(w.message) for w in seen if "running graph" in str(w.message)]
    assert not eagerly, eagerly  # a graph the compiler gave up on runs eagerly
    assert x.grad is not None
    return x.grad


@pytest.mark.parametrize("shape, k, s, p, ceil", CASES)
def test_max_pool_backward_matches_eager_without_aten(shape: tuple[int, ...], k: Any, s: Any,
                                                      p: Any, ceil: bool) -> None:
    torch.manual_seed(0)
    x = torch.randn(shape).round(decimals=1)  # ties: the indices pick the first maximum
    pool = F.max_pool3d if len(shape) == 5 else F.max_pool2d

    def fn(t: torch.Tensor) -> torch.Tensor:
        y = pool(t, k, s, p, ceil_mode=ceil)
        return (y * torch.linspace(-1, 1, y.numel()).view(y.shape)).sum()

    got, want = _grads(fn, x, True), _grads(fn, x, False)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
