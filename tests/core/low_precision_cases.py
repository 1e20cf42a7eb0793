"""bfloat16 chains through the Triton backend with the option low_precision "fused" (each
value rounded only where stored): every output as close to the function run in float64 as
eager's, give or take one bfloat16 step.

`python low_precision_cases.py BACKEND [LOW_PRECISION]` prints one `name result` line per
case; test_low_precision.py runs it under the Triton interpreter (TRITON_INTERPRET must be
set before Triton is imported)."""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from correctness_cases import print_results  # noqa: E402
from ks_helpers import compiled  # noqa: E402


def gelu_new(x: torch.Tensor) -> torch.Tensor:
    """GPT-2's GELU, written out: eight bfloat16 ops, each rounded in eager."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


def gelu_new_grad(g: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Its backward by autograd in bfloat16, and the bias gradient (a column sum)."""
    with torch.enable_grad():
        xi = x.detach().requires_grad_()
        (dx,) = torch.autograd.grad(gelu_new(xi), xi, g)
    return dx, dx.sum(0)


def _bf16(*size: int) -> torch.Tensor:
    return torch.randn(*size).to(torch.bfloat16)


CASES: dict[str, Callable[[], tuple[Callable[..., Any], tuple[Any, ...]]]] = {
    "gelu_new": lambda: (gelu_new, (_bf16(64, 96),)),
    "gelu_new_grad": lambda: (gelu_new_grad, (_bf16(300, 48), _bf16(300, 48))),
}


def check(name: str, backend_name: str, low_precision: str = "fused") -> str:
    """ok when every output is as close to fn in float64 as eager's is, give or take one
    bfloat16 step at the output's scale (eager rounds every op; "fused" only stores)."""
    torch.manual_seed(0)
    fn, args = CASES[name]()
    with torch.no_grad():
        eager = fn(*args)
        wide = fn(*[a.double() for a in args])
        got = compiled(fn, backend=backend_name, low_precision=low_precision)(*args)
    for i, (g, e, w) in enumerate(zip(got, eager, wide)):
        if g.dtype != e.dtype or g.shape != e.shape:
            return f"output {i}: {g.dtype} {tuple(g.shape)}, eager {e.dtype} {tuple(e.shape)}"
        ours, theirs = (float((t.double() - w).abs().max()) for t in (g, e))
        if ours > theirs + float(w.abs().max()) / 128:
            return f"output {i}: max error {ours:.3g} against float64, eager's {theirs:.3g}"
    return "ok"


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "fused"
    print_results(CASES, lambda name, be: check(name, be, mode), sys.argv[1])
