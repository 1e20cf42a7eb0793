"""Column reductions (the loads step along the outputs), row sums with few outputs, and the
backward reductions of the training steps, through the Triton backend: split into two
passes where the rows are long
(odd and prime row counts, so the first pass is masked), with producers fused in (a
permuted copy, q/k/v selected from one gradient, GELU's backward), in several dtypes.
Each case prints `name ok` or what differs from eager; test_column_reductions.py runs this
under the Triton interpreter, in a process of its own (TRITON_INTERPRET must be set before
Triton is imported).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ks_helpers import TOLERANCES, assert_same, reference  # noqa: E402

from benchmarks.cases import (  # noqa: E402
    gelu_bias_grad,
    layernorm_backward,
    mha_inproj_bias_grad,
    rmsnorm_backward,
)

# A float32 sum of a thousand values differs from eager's by its rounding order (eager's
# own error against float64 is ~1e-5 where the sum cancels): float32 results are
# compared with the function in float64, at a tolerance that covers both orders.
FLOAT32 = (1e-4, 1e-4)


def _nan_cols() -> tuple[torch.Tensor]:
    x = torch.randn(1031, 12)
    x[500, 3] = float("nan")
    x[7, 11] = float("nan")
    return (x,)


def _ln_inputs() -> tuple[torch.Tensor, ...]:
    x = torch.randn(700, 40)
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-6)
    return torch.randn(700, 40), x, mean, rstd, torch.randn(40), torch.randn(40)


def _mha_inputs() -> tuple[torch.Tensor, ...]:
    # [B, H, L, D] laid out [B, L, H, D]; 150 * 4 = 600 tokens: a split of 2 x 300
    return tuple(torch.randn(4, 150, 2, 8).transpose(1, 2) for _ in range(3))


def _stored_producer(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2.0 + 1.0
    return y, y.sum(0)


def _out_proj_grads(g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The out-projection's gradients in nn.MultiheadAttention (batch_first): [B, L, E]
    back to [L, B, E] (stored), its [E, L*B] transpose (the weight GEMM's operand) and
    the column sum (the bias gradient), all from one load of g."""
    t = g.transpose(0, 1).contiguous()
    v = t.view(-1, g.shape[-1])
    return t, v.t().contiguous(), v.sum(0)


def _bn_weight_grads(out: torch.Tensor, g: torch.Tensor, x: torch.Tensor
                     ) -> tuple[torch.Tensor, ...]:
    """ReLU's backward (stored for the convolution's) and a batch norm's weight and bias
    gradients over N, H, W: a row sum of 72 outputs, split in whole images."""
    gr = torch.where(out <= 0, 0, g)
    return gr, gr.sum((0, 2, 3)), (gr * x).sum((0, 2, 3))


def bn_relu_backward(out: torch.Tensor, g1: torch.Tensor, g2: torch.Tensor, x: torch.Tensor,
                     mean: torch.Tensor, scale: torch.Tensor, xin: torch.Tensor,
                     w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """An eval-mode batch norm's backward behind a ReLU, in a convnet's training step:
    the gradient (two branches added) through the ReLU's mask, its sums over N, H, W
    (the bias and weight gradients: columns over NHWC), and the input gradient fed to
    the convolution's backward, all channels-last (the conv makes them so)."""
    gr = torch.where(out <= 0, 0, g1 + g2)
    c = (None, slice(None), None, None)
    s1, s2 = gr.sum((0, 2, 3)), (gr * (x - mean[c])).sum((0, 2, 3))
    dx, dw, _ = torch.ops.aten.convolution_backward(
        gr * scale[c], xin, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
        [True, True, False])
    return s1, s2, dx, dw


def _bn_inputs(n: int, c: int, h: int) -> Callable[[], tuple[torch.Tensor, ...]]:
    def make() -> tuple[torch.Tensor, ...]:
        nhwc = [torch.randn(n, c, h, h).to(memory_format=torch.channels_last)
                for _ in range(5)]
        out, g1, g2, x, xin = nhwc
        return (out, g1, g2, x, torch.randn(c), torch.randn(c), xin,
                torch.randn(c, c, 1, 1))
    return make


def _selected(x: torch.Tensor, y: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return torch.where(m, x, y).sum(0)


CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
    "sum0_exact": (lambda x: x.sum(0), lambda: (torch.randn(1024, 40),)),
    "sum0_prime_rows": (lambda x: x.sum(0), lambda: (torch.randn(1009, 37),)),
    "sum0_fp16": (lambda x: x.sum(0), lambda: (torch.randn(1536, 24).half(),)),
    "sum0_int64": (lambda x: x.sum(0), lambda: (torch.randint(-50, 50, (700, 9)),)),
    "amax0_nan": (lambda x: x.amax(0), _nan_cols),
    "mean01_3d": (lambda x: x.mean((0, 1)), lambda: (torch.randn(8, 131, 20),)),
    "var0": (lambda x: x.var(0), lambda: (torch.randn(800, 33),)),
    "sum1_between_outputs": (lambda x: x.sum(1), lambda: (torch.randn(3, 700, 17),)),
    "prod0": (lambda x: (1.0 + x * 1e-3).prod(0), lambda: (torch.randn(900, 10),)),
    "sum0_of_permuted": (lambda x: x.permute(1, 0, 2).reshape(1500, 20).sum(0),
                         lambda: (torch.randn(30, 50, 20),)),
    "stored_producer": (_stored_producer, lambda: (torch.randn(1000, 24),)),
    "where_non_literal": (_selected, lambda: (torch.randn(900, 16), torch.randn(900, 16),
                                              torch.arange(16) % 3 == 0)),
    "bn_weight_grads": (_bn_weight_grads,
                        lambda: tuple(torch.randn(16, 72, 32, 32) for _ in range(3))),
    "out_proj_grads": (_out_proj_grads, lambda: (torch.randn(3, 201, 24),)),
    "gelu_bias_grad": (gelu_bias_grad, lambda: (torch.randn(600, 48), torch.randn(600, 48))),
    "mha_inproj_bias_grad": (mha_inproj_bias_grad, _mha_inputs),
    # NHWC column sums split in whole images (4 x 256), in parts of 1.5 images (6 x 14 x
    # 14 = 4 x 294: the position through a division of the flat row), masked (605 rows:
    # 2 x 303), and 8 channels over 16384 rows (few outputs: a column split too)
    "bn_relu_backward_nhwc": (bn_relu_backward, _bn_inputs(4, 24, 16)),
    "bn_relu_backward_nhwc_part_images": (bn_relu_backward, _bn_inputs(6, 20, 14)),
    "bn_relu_backward_nhwc_masked": (bn_relu_backward, _bn_inputs(5, 24, 11)),
    "bn_relu_backward_nhwc_few_channels": (bn_relu_backward, _bn_inputs(4, 8, 64)),
    "layernorm_backward": (layernorm_backward, _ln_inputs),
    "rmsnorm_backward": (rmsnorm_backward, lambda: (torch.randn(640, 32), torch.randn(640, 32),
                                                    torch.randn(32))),
}


def check(name: str, backend_name: str) -> str:
    from kernelscope.compiler import backend

    fn, make = CASES[name]
    torch._dynamo.reset()
    torch.manual_seed(0)
    args = make()
    eager, ref = reference(fn, args)
    if not any(a.dtype in (torch.float16, torch.bfloat16) for a in args):
        with torch.no_grad():
            wide = fn(*[a.double() if a.is_floating_point() else a for a in args])
        wide = list(wide) if isinstance(wide, (tuple, list)) else [wide]
        ref = [w.to(e.dtype) for w, e in zip(wide, eager)]
    with torch.no_grad():
        options = {"backend": backend_name, "conv_layout": "channels_last"}
        got = torch.compile(fn, backend=backend, options=options)(*args)
    saved = TOLERANCES[torch.float32]
    TOLERANCES[torch.float32] = FLOAT32
    try:
        assert_same(got, eager, ref)
    except AssertionError as e:
        return " ".join(str(e).split())[:300]
    finally:
        TOLERANCES[torch.float32] = saved
    return "ok"


if __name__ == "__main__":
    for case in sys.argv[2:] or CASES:
        try:
            result = check(case, sys.argv[1])
        except Exception as e:  # noqa: BLE001 - reported per case
            result = f"raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(f"{case} {result}", flush=True)
