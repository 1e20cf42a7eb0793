"""Convolution graphs laid out channels-last end to end (lowering/layout.py, forced on the
CPU with the option conv_layout="channels_last"), run under the Triton interpreter
(test_conv_layout.py runs this script).

Each case puts a convolution's NHWC result through what follows convolutions in models:
views, permutes, cat, pooling, a broadcast mean, a grouped convolution, a linear layer.
Prints `name ok`, or `name` and what went wrong; `plan` checks the wrapper and kernels.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

torch.manual_seed(0)
CONV = torch.nn.Conv2d(4, 6, 3, padding=1).eval().requires_grad_(False)
LIN = torch.nn.Linear(6 * 5 * 5, 3).requires_grad_(False)
W2 = torch.randn(6, 3, 3, 3, generator=torch.Generator().manual_seed(1))
PATCH = torch.nn.Conv2d(4, 6, 2, stride=1).eval().requires_grad_(False)  # 5x5 -> 4x4
MIX = torch.nn.Linear(6, 6).requires_grad_(False)


def _patch_merging(x: torch.Tensor) -> torch.Tensor:
    """Swin's: a patch embedding's NHWC result as tokens, a residual linear, then the
    four 2x2 neighbours (1::2 slices) side by side and a layer norm. Its cat branches'
    indices once lost their sign to a dropped multiple (a NaN on the H100)."""
    t = PATCH(x).flatten(2).transpose(1, 2)
    t = (MIX(t) + t).view(2, 4, 4, 6)
    parts = [t[:, 0::2, 0::2], t[:, 1::2, 0::2], t[:, 0::2, 1::2], t[:, 1::2, 1::2]]
    return F.layer_norm(torch.cat(parts, -1).view(2, -1, 24), (24,))

CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "view_linear": lambda x: LIN(CONV(x).view(2, -1)),
    "flatten_transpose": lambda x: CONV(x).flatten(2).transpose(1, 2) * 2,
    "permute_reshape": lambda x: CONV(x).permute(0, 2, 3, 1).reshape(2, -1) + 1,
    "cat_sum": lambda x: torch.cat([CONV(x), CONV(x) * 2], 1).sum((2, 3)),
    "relu_maxpool": lambda x: F.max_pool2d(torch.relu(CONV(x)), 2),
    "mean_broadcast": lambda x: CONV(x).mean((2, 3), keepdim=True) * CONV(x),
    "grouped_conv": lambda x: F.conv2d(torch.relu(CONV(x)), W2, groups=2) + 0,
    "returned": lambda x: CONV(x),  # a graph output keeps eager's strides
    "returned_relu": lambda x: torch.relu(CONV(x)),
    "returned_twice": lambda x: (CONV(x), CONV(x).permute(0, 2, 3, 1)),
    "avg_pool": lambda x: F.avg_pool2d(CONV(x) + 1, 2, ceil_mode=True),
    "patch_merging": _patch_merging,
}
# the convolution's channels-last strides in the wrapper (CONV's unless named here)
NHWC = {"patch_merging": "(96, 1, 24, 6)"}


def _compiled(fn: Callable[..., Any], sources: list[str]) -> Callable[..., Any]:
    import kernelscope.compiler.compile_fx as cfx
    from kernelscope import compiler

    orig = cfx.generate_wrapper

    def keep(*a: Any, **k: Any) -> Any:
        src, lines = orig(*a, **k)
        sources.append(src)
        return src, lines

    cfx.generate_wrapper = keep  # type: ignore[assignment]
    torch._dynamo.reset()
    return torch.compile(fn, backend=lambda gm, ex: compiler.backend(
        gm, ex, options={"backend": "triton", "conv_layout": "channels_last",
                         "cache_dir": tempfile.mkdtemp()}))


def check(name: str) -> str:
    x = torch.randn(2, 4, 5, 5)
    sources: list[str] = []
    with torch.no_grad():
        got, want = _compiled(CASES[name], sources)(x), CASES[name](x)
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,)):
        if not torch.allclose(a, b, rtol=1e-4, atol=1e-4):
            return f"mismatch: max abs err {(a - b).abs().max().item():.3g}"
        if a.stride() != b.stride():
            return f"strides {a.stride()} where eager has {b.stride()}"
    if not any(NHWC.get(name, "(150, 1, 30, 6)") in s for s in sources):  # channels-last
        return "no channels-last result planned"
    return "ok"


def plan() -> str:
    """The BN + ReLU kernel between two convolutions stores NHWC in memory order."""
    sources: list[str] = []
    with torch.no_grad():
        _compiled(CASES["grouped_conv"], sources)(torch.randn(2, 4, 5, 5))
    text = "\n".join(sources)
    if "iterates in the memory order" not in text:
        return "no kernel walks its output's memory order"
    if "conform(torch.ops.aten.convolution" not in text:
        return "the convolution's strides are not checked at run time"
    return "ok"


if __name__ == "__main__":
    for case in sys.argv[1:] or [*sorted(CASES), "plan"]:
        try:
            print(case, plan() if case == "plan" else check(case), flush=True)
        except Exception as e:  # noqa: BLE001 - one line per case
            print(case, f"error: {type(e).__name__}: {e}", flush=True)
