"""GEMM template cases: products with fused epilogues against eager, on small shapes.

Each case is compiled for Triton with `matmul="template"` (the template, unmeasured) and
must (1) match eager, float16 / bfloat16 results against the function run in float32
and rounded, at the dtype's tolerance, and (2) run at least one template kernel (a
`triton_tem_` kernel), with `fused` naming FX ops that must be in a template kernel's
name (the epilogue). The sizes are not multiples of the block sizes, so the masks are
exercised. Run as a script (`python gemm_cases.py`, under TRITON_INTERPRET=1: an
out-of-bounds access crashes the process; `--device cuda` on a GPU) it prints one
`name result` line per case.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Case = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], tuple[str, ...]]
TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (2e-2, 1e-2),
       torch.bfloat16: (5e-2, 2e-2)}


def _mm_inputs(dtype: torch.dtype, m: int = 37, k: int = 50, n: int = 70
               ) -> Callable[[], tuple[Any, ...]]:
    def make() -> tuple[Any, ...]:
        g = torch.Generator().manual_seed(0)
        return (torch.randn(m, k, generator=g).to(dtype),
                torch.randn(k, n, generator=g).div(k ** 0.5).to(dtype),
                torch.randn(n, generator=g).to(dtype),
                torch.randn(m, n, generator=g).to(dtype))
    return make


def _addmm_gelu_residual(x: Any, w: Any, b: Any, r: Any) -> Any:
    return F.gelu(torch.addmm(b, x, w)) + r


def _mm_relu_to_float(x: Any, w: Any, b: Any, r: Any) -> Any:
    return torch.relu(x @ w).float()


def _linear_transposed_weight(x: Any, w: Any, b: Any, r: Any) -> Any:
    # F.linear: x @ weight.t() + bias, the weight read through a transposed view
    return torch.tanh(F.linear(x, w.t().contiguous(), b))


def _two_consumers(x: Any, w: Any, b: Any, r: Any) -> Any:
    y = x @ w
    return y, torch.sigmoid(y) * r


def _transposed_consumer(x: Any, w: Any, b: Any, r: Any) -> Any:
    # y.t() * 2 reads the product at another element than it computes: not an epilogue
    y = x @ w
    return y.t() * 2.0, y + b


def _bmm_inputs(dtype: torch.dtype) -> Callable[[], tuple[Any, ...]]:
    def make() -> tuple[Any, ...]:
        g = torch.Generator().manual_seed(1)
        return (torch.randn(3, 20, 33, generator=g).to(dtype),
                torch.randn(3, 33, 18, generator=g).div(33 ** 0.5).to(dtype))
    return make


def _bmm_scale_silu(a: Any, b: Any) -> Any:
    return F.silu(torch.bmm(a, b) * 0.125)


def _matmul_4d(a: Any, b: Any) -> Any:
    # (2, 3, 20, 33) @ (2, 3, 33, 18): a bmm over views
    return torch.matmul(a.view(1, 3, 20, 33).expand(2, 3, 20, 33),
                        b.view(1, 3, 33, 18).expand(2, 3, 33, 18)) + 1.0


CASES: dict[str, Case] = {
    "addmm_gelu_residual_f32": (_addmm_gelu_residual, _mm_inputs(torch.float32),
                                ("addmm", "erf", "add")),
    "addmm_gelu_residual_f16": (_addmm_gelu_residual, _mm_inputs(torch.float16),
                                ("addmm", "erf")),
    "addmm_gelu_residual_bf16": (_addmm_gelu_residual, _mm_inputs(torch.bfloat16),
                                 ("addmm",)),
    "mm_relu_to_float_f16": (_mm_relu_to_float, _mm_inputs(torch.float16), ("relu",)),
    "mm_exact_blocks_f32": (_addmm_gelu_residual, _mm_inputs(torch.float32, 64, 64, 64),
                            ("addmm", "erf")),
    "linear_transposed_weight_f32": (_linear_transposed_weight,
                                     _mm_inputs(torch.float32, 19, 24, 24), ("tanh",)),
    "two_consumers_f32": (_two_consumers, _mm_inputs(torch.float32), ("sigmoid",)),
    "transposed_consumer_f32": (_transposed_consumer, _mm_inputs(torch.float32), ()),
    "bmm_scale_silu_f32": (_bmm_scale_silu, _bmm_inputs(torch.float32), ("bmm", "sigmoid")),
    "bmm_scale_silu_f16": (_bmm_scale_silu, _bmm_inputs(torch.float16), ("bmm",)),
    "matmul_4d_f32": (_matmul_4d, _bmm_inputs(torch.float32), ()),
}


def _reference(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[torch.Tensor]:
    """fn in float32 on float32 copies of the inputs, rounded to eager's output dtypes."""
    eager = fn(*args)
    eager = list(eager) if isinstance(eager, tuple) else [eager]
    wide = fn(*[a.float() for a in args])
    wide = list(wide) if isinstance(wide, tuple) else [wide]
    return [w.to(e.dtype) for w, e in zip(wide, eager)]


def check(name: str, device: str = "cpu") -> str:
    from kernelscope.compiler.compile_fx import make_backend
    from kernelscope.compiler.options import CompileOptions

    fn, make, fused = CASES[name]
    args = tuple(a.to(device) for a in make())
    sink: list[Any] = []
    torch._dynamo.reset()
    options = CompileOptions(backend="triton", matmul="template")
    with torch.no_grad():
        got = torch.compile(fn, backend=make_backend(options, sink=sink))(*args)
        ref = _reference(fn, args)
    outs = list(got) if isinstance(got, tuple) else [got]
    if len(outs) != len(ref):
        return f"{len(outs)} outputs, eager {len(ref)}"
    for i, (o, r) in enumerate(zip(outs, ref)):
        if o.dtype != r.dtype or o.shape != r.shape:
            return f"output {i}: {o.dtype} {tuple(o.shape)} vs {r.dtype} {tuple(r.shape)}"
        low = min((a.dtype for a in args), key=lambda d: torch.finfo(d).bits)
        atol, rtol = TOL[low if low in TOL else r.dtype]
        if not torch.allclose(o.float(), r.float(), atol=atol, rtol=rtol):
            err = (o.float() - r.float()).abs().max().item()
            return f"output {i} differs: max error {err:.3g}"
    kernels = [k for c in sink for k in c.kernels if k.startswith("triton_tem_")]
    if not kernels:
        return f"no template kernel ran: {[k for c in sink for k in c.kernels]}"
    for op in fused:
        if not any(f"_{op}_" in k or k.endswith(f"_{op}") for k in kernels):
            return f"{op} not fused into a template: {kernels}"
    return "ok"


if __name__ == "__main__":
    # python gemm_cases.py [--device cuda] [case ...]: on a GPU, real Triton kernels
    argv = sys.argv[1:]
    dev = "cpu"
    if argv[:1] == ["--device"]:
        dev, argv = argv[1], argv[2:]
    for case in argv or CASES:
        try:
            result = check(case, dev)
        except Exception as e:  # noqa: BLE001 - reported per case
            result = f"raised {type(e).__name__}: {str(e).splitlines()[0][:300]}"
        print(f"{case} {result}", flush=True)
