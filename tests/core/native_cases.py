"""Regression cases that must be lowered natively: the ATen fallback off, eager's answer.

Each case is (fn, make_inputs, backends): compiled with `fallback=False`, no graph may run
eagerly on the backends listed, and the result must equal eager's (correctness_cases'
`compare`). On the other backends the op has no native form: the case must still be right,
through the fallback, with the reason in the warning. Run as a script
(`python native_cases.py BACKEND`) it prints one line per case: the tests run it
in-process for C++ and in a subprocess under the Triton interpreter.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from correctness_cases import compare, print_results  # noqa: E402

INF, NAN = float("inf"), float("nan")
BOTH = ("cpp", "triton")
NativeCase = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], tuple[str, ...]]


def _special() -> tuple[torch.Tensor]:
    """Values where math functions differ most: signed zeros, infinities, NaN, tiny, big."""
    return (torch.tensor([-INF, -3.5, -1.0, -0.5, -0.0, 0.0, 1e-30, 0.5, 1.0, 2.5, 3.0, 1e30,
                          INF, NAN]),)


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    (x,) = _special()
    return x, x.flip(0)


def _positive() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.rand(16, generator=g) * 5 + 0.1, torch.rand(16, generator=g) * 5 + 0.1


def _unit() -> tuple[torch.Tensor]:
    return (torch.linspace(-0.99, 0.99, 15),)


def _halves() -> tuple[torch.Tensor]:
    return (torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 8388609.0, 3.3, -0.0, 7.25e-3]),)


CASES: dict[str, NativeCase] = {
    # graph constants (get_attr) are wrapper inputs the compiled graph passes itself
    "graph_constant_index": (lambda x: x[torch.tensor([0, 2, -1])] * 2,
                             lambda: (torch.randn(5, 4),), BOTH),
    "graph_constant_operand": (lambda x: x + torch.tensor([1.0, -2.0, 3.0, 0.5]),
                               lambda: (torch.randn(3, 4),), BOTH),
    # math functions: formulas over tl primitives under the interpreter, C++ std:: / Math.h
    "log10_erfc": (lambda x: (torch.log10(x), torch.erfc(x)), _special, BOTH),
    "inverse_hyperbolic": (lambda x: (torch.asinh(x), torch.acosh(x), torch.atanh(x)),
                           _special, BOTH),
    "atanh_unit": (torch.atanh, _unit, BOTH),
    "signbit_copysign": (lambda x, y: (torch.signbit(x), torch.copysign(x, y)), _pair, BOTH),
    "signbit_int": (torch.signbit, lambda: (torch.tensor([-3, 0, 5]),), BOTH),
    "hypot": (torch.hypot, _pair, BOTH),
    "hypot_big": (torch.hypot, lambda: (torch.tensor([3e30, 0.0]), torch.tensor([4e30, 0.0])),
                  BOTH),
    "fmin_fmax_nan": (lambda x, y: (torch.fmin(x, y), torch.fmax(x, y)), _pair, BOTH),
    "round_half_even": (torch.round, _halves, BOTH),
    "round_decimals": (lambda x: (torch.round(x * 7, decimals=3),
                                  torch.round(x * 700, decimals=-2)), _unit, BOTH),
    "ldexp": (torch.ldexp, lambda: (torch.randn(8), torch.arange(8) - 4), BOTH),
    "angle_real": (torch.angle, _special, BOTH),
    # only C++ computes these natively (Math.h: eager's own functions); Triton falls back
    "erfinv": (torch.erfinv, _unit, ("cpp",)),
    "lgamma_digamma": (lambda x: (torch.lgamma(x), torch.digamma(x)), _special, ("cpp",)),
    "polygamma": (lambda x: (torch.polygamma(0, x), torch.polygamma(1, x),
                             torch.polygamma(3, x)), lambda: _positive()[:1], ("cpp",)),
    "igamma_zeta": (lambda a, x: (torch.igamma(a, x), torch.igammac(a, x),
                                  torch.special.zeta(a + 1, x)), _positive, ("cpp",)),
    "bessel": (lambda x: (torch.i0(x), torch.special.i0e(x), torch.special.i1(x),
                          torch.special.bessel_j0(x), torch.special.modified_bessel_k1(x)),
               lambda: _positive()[:1], ("cpp",)),
    "erfcx_ndtri": (lambda x: (torch.special.erfcx(x), torch.special.ndtri(x.abs()),
                               torch.special.log_ndtr(x)), _unit, ("cpp",)),
    "chebyshev": (lambda x: torch.special.chebyshev_polynomial_t(x, 3.0), _unit, ("cpp",)),
    "nextafter": (torch.nextafter, _pair, ("cpp",)),
    "frexp": (torch.frexp, lambda: (_special()[0][1:-3],), ("cpp",)),
    # batch norm in training (updates the running stats): decomposed, not left to ATen
    "batch_norm_with_update": (
        lambda x, w, m, v: (torch.ops.aten._batch_norm_with_update(x, w, w, m, v, 0.1,
                                                                     1e-5)[0], m + 0, v + 0),
        lambda: (torch.randn(4, 3, 5), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5),
        BOTH),
    # a 0-d operand's truth value with a block's: `|` refused them under the interpreter
    "or_with_0d": (lambda x, y: ((y > 0) | (x > 0), torch.logical_and(y < 0, x < 0),
                                 torch.logical_xor(x > 0, y > 0), torch.signbit(y) ^ (x > 0)),
                   lambda: (torch.tensor([-1.0, -0.0, 0.0, 2.0]), torch.tensor(-1.0)), BOTH),
    "hypot_0d": (torch.hypot, lambda: (torch.tensor([3.0, -0.0, INF, NAN]), torch.tensor(4.0)),
                 BOTH),
    # zero-size multi-output results: nothing to compute (index math divided by zero)
    "frexp_empty": (torch.frexp, lambda: (torch.randn(0, 3),), BOTH),
}


def check_native(name: str, backend_name: str) -> str:
    """"ok" when native (or, off the case's native backends, right through the fallback)."""
    from kernelscope.compiler import backend

    fn, make, native = CASES[name]
    torch._dynamo.reset()
    torch.manual_seed(0)
    args = make()
    want_native = backend_name in native
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = fn(*[a.clone() for a in args])
        options = {"backend": backend_name, "fallback": not want_native}
        got = torch.compile(fn, backend=backend, options=options)(*args)
    eager = [str(w.message) for w in caught if "kernelscope: running graph" in str(w.message)]
    if want_native and eager:
        return f"not native: {eager[0][:200]}"
    return compare(got, expected)


if __name__ == "__main__":
    print_results(CASES, check_native, sys.argv[1])
