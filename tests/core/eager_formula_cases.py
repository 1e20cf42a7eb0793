"""Cases where the compiled result must follow eager's own formula, not another correct
one: the Bessel functions J0, J1, Y0, Y1 (eager's Cephes polynomials, codegen/bessel.py)
and addbmm in bfloat16/float16 (float32 throughout, one rounding); and ops that order
values (topk, sort, max, relu, ...) on negatives, NaN and -0.0, bfloat16 and float32.

    python eager_formula_cases.py BACKEND [--device=cuda] [CASE...]

prints `name ok` or `name <what differs>` per case, with the ATen fallback off, so an op
left to ATen shows as "ran eagerly". Triton on the CPU runs under TRITON_INTERPRET=1, in
a process of its own.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch

from kernelscope.compiler import backend as kernelscope

SPECIAL = [0.0, -0.0, 1e-6, -1e-6, 5.0, 5.0000001, 4.9999999, 2.404825557695773,
           3.8317059702075125, 0.8935769662791675, 2.197141326031017, 1e3, 1e5,
           float("inf"), float("-inf"), float("nan")]


def _points(dtype: torch.dtype) -> torch.Tensor:
    return torch.cat([torch.linspace(-30, 30, 2001, dtype=torch.float64),
                      torch.tensor(SPECIAL, dtype=torch.float64)]).to(dtype)


def _compiled(fn: Callable[..., Any], backend: str, *args: Any) -> tuple[Any, list[str]]:
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(fn, backend=kernelscope,
                            options={"backend": backend, "fallback": False})(*args)
    return out, [str(w.message) for w in caught if "running graph" in str(w.message)]


def bessel(name: str, dtype: torch.dtype, backend: str, device: str) -> str:
    """Eager's values to a few ulps, NaN, infinities and signed zeros exactly."""
    fn = getattr(torch.special, name)
    x = _points(dtype).to(device)
    got, eager_graphs = _compiled(fn, backend, x)
    if eager_graphs:
        return "ran eagerly: " + eager_graphs[0][:120]
    want = fn(x)
    fin = want.isfinite()
    if not torch.equal(got.isnan(), want.isnan()) or \
            not torch.equal(got[~fin & ~want.isnan()], want[~fin & ~want.isnan()]):
        return "NaN or infinity differs"
    if not torch.equal(got[want == 0].signbit(), want[want == 0].signbit()):
        return "a zero's sign differs"
    ulp = torch.finfo(dtype).eps
    err = ((got - want).abs() / want.abs().clamp_min(1.0))[fin].max().item()
    return "ok" if err <= 8 * ulp else f"max error {err:.3g} (eager's own formula: <= 8 ulp)"


def addbmm(dtype: torch.dtype, backend: str, device: str) -> str:
    """One rounding of the float32 result: within half an ulp of the exact value, and
    never further from it than eager (which rounds after every batch)."""
    g = torch.Generator().manual_seed(0)
    m = (torch.randn(6, 5, generator=g) * 40).to(dtype)
    b1 = (torch.randn(10, 6, 7, generator=g) * 3).to(dtype)
    b2 = (torch.randn(10, 7, 5, generator=g) * 3).to(dtype)

    def f(m: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
        return torch.addbmm(m, b1, b2, beta=0.5, alpha=0.7)

    m, b1, b2 = m.to(device), b1.to(device), b2.to(device)
    got, eager_graphs = _compiled(f, backend, m, b1, b2)
    if eager_graphs:
        return "ran eagerly: " + eager_graphs[0][:120]
    exact = f(m.double(), b1.double(), b2.double())
    ours = (got.double() - exact).abs()
    theirs = (f(m, b1, b2).double() - exact).abs()
    bits = {torch.bfloat16: 7, torch.float16: 10}[dtype]  # stored mantissa bits
    half_ulp = torch.ldexp(torch.ones_like(exact), torch.frexp(exact).exponent - 2 - bits)
    if got.dtype != dtype:
        return f"dtype {got.dtype}"
    if ours.max() > theirs.max():
        return f"further from exact than eager: {ours.max():.3g} > {theirs.max():.3g}"
    if bool((ours > half_ulp * 1.01).any()):
        return f"{int((ours > half_ulp * 1.01).sum())} elements more than half an ulp off"
    return "ok"


def _equal(got: Any, want: Any) -> bool:
    gs = got if isinstance(got, (tuple, list)) else [got]
    ws = want if isinstance(want, (tuple, list)) else [want]
    return len(gs) == len(ws) and all(
        g.dtype == w.dtype and torch.equal(g.nan_to_num(7.0), w.nan_to_num(7.0))
        and torch.equal(g.isnan(), w.isnan())
        and torch.equal(g[w == 0].signbit(), w[w == 0].signbit())  # -0.0 is kept
        if w.is_floating_point() else torch.equal(g, w)
        for g, w in zip(gs, ws))


ORDERING: dict[str, Callable[[torch.Tensor], Any]] = {
    "topk": lambda x: torch.topk(x, 3), "kthvalue": lambda x: torch.kthvalue(x, 4),
    "sort": lambda x: torch.sort(x[:, :8], stable=True), "max": lambda x: x.max(1),
    "amin": lambda x: x.amin(1), "argmax": lambda x: x.argmax(1), "gt": lambda x: x > -1.5,
    "maximum": lambda x: torch.maximum(x, x.flip(1)), "relu": torch.relu,
    "clamp": lambda x: x.clamp(-2, 3),
}


def ordering(dtype: torch.dtype, backend: str, device: str) -> str:
    """Ops that order values, on negatives, a NaN and a -0.0: eager's results exactly (the
    interpreter holds bfloat16 as uint16 bits, which order as unsigned integers; relu of
    NaN is NaN)."""
    g = torch.Generator().manual_seed(0)
    # Distinct values, exact in bfloat16 (no ties: which index a tie gets is eager's own
    # choice, and differs between its CPU and CUDA kernels), one -0.0, one NaN.
    x = (torch.randperm(198, generator=g) - 99).to(torch.float32).reshape(6, 33) * 0.25
    x[x == 0] = 30.0
    x = x.to(dtype)
    x[0, 3], x[1, 4] = -0.0, float("nan")
    x = x.to(device)
    bad = []
    for name, fn in ORDERING.items():
        got, eager_graphs = _compiled(fn, backend, x)
        if eager_graphs or not _equal(got, fn(x)):
            bad.append(name + (" (ran eagerly)" if eager_graphs else ""))
    return "ok" if not bad else "differ: " + ", ".join(bad)


CASES: dict[str, Callable[[str, str], str]] = {  # name -> f(backend, device)
    "ordering_bf16": lambda b, d: ordering(torch.bfloat16, b, d),
    "ordering_f32": lambda b, d: ordering(torch.float32, b, d),
    **{f"{n}_{dn}": (lambda b, d, n=n, dt=dt: bessel(f"bessel_{n}", dt, b, d))
       for n in ("j0", "j1", "y0", "y1")
       for dn, dt in (("f64", torch.float64), ("f32", torch.float32))},
    "addbmm_bf16": lambda b, d: addbmm(torch.bfloat16, b, d),
    "addbmm_f16": lambda b, d: addbmm(torch.float16, b, d),
}

if __name__ == "__main__":
    backend, rest = sys.argv[1], sys.argv[2:]
    device = next((a.split("=", 1)[1] for a in rest if a.startswith("--device=")), "cpu")
    wanted = [a for a in rest if not a.startswith("--")]
    for case, run in CASES.items():
        if wanted and case not in wanted:
            continue
        try:
            result = run(backend, device)
        except Exception as e:  # noqa: BLE001 - reported per case
            result = f"raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(f"{case} {result}", flush=True)
