"""Kernels Triton's real frontend refused (a `CompilationError` at the first launch on a
GPU) while the interpreter ran them: each case lowers for CUDA and builds every kernel
offline (triton_frontend.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Case = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]


def _bounds() -> torch.Tensor:
    return torch.tensor([-0.9, -0.8, 0.1, 0.2, 0.5, 0.9])


def _bessel(x: torch.Tensor) -> torch.Tensor:
    s = torch.special
    return s.bessel_j0(x) + s.bessel_j1(x) + s.bessel_y0(x) + s.bessel_y1(x)


FRONTEND_CASES: dict[str, Case] = {
    "bucketize": (lambda x, b: torch.bucketize(x, b),
                  lambda: (torch.rand(64, 64) * 2 - 1, _bounds())),
    "bucketize_right_int32": (lambda x, b: torch.bucketize(x, b, out_int32=True, right=True),
                              lambda: (torch.rand(64, 64) * 2 - 1, _bounds())),
    "index_negative_single": (lambda x, i: x[i] + 1,
                              lambda: (torch.randn(8, 4), torch.tensor([-1]))),
    "index_single": (lambda x, i: x[i] * 2, lambda: (torch.randn(8), torch.tensor([3]))),
    "full_like_div_zero": (lambda x: torch.full_like(x, 1.0) / 0, lambda: (torch.randn(4),)),
    # Eager's Bessel polynomials (codegen/bessel.py), helpers of the wrapper's prelude.
    "bessel_f64": (_bessel, lambda: (torch.linspace(-20, 20, 256, dtype=torch.float64),)),
    "bessel_f32": (_bessel, lambda: (torch.linspace(-20, 20, 256),)),
    "multi_margin_loss": (F.multi_margin_loss,
                          lambda: (torch.randn(3, 5), torch.tensor([1, 0, 4]))),
}
