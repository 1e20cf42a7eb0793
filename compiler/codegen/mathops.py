"""Op-table rules for the math functions (ops.MATH_UNARY / MATH_BINARY), per backend.

C++ calls the standard library, else the functions eager's CPU kernels call
(`ATen/native/Math.h`), so the values are eager's. Triton calls libdevice on a GPU; under
the interpreter only formulas over `tl` primitives. An op without a rule goes to ATen.
"""

from __future__ import annotations

import os
import re

import torch

from kernelscope.compiler.codegen.optable import Rule, calls, float_only
from kernelscope.compiler.ir.ops import POLYNOMIALS

ATEN_UNARY = {  # op -> the Math.h function eager's CPU kernel calls
    "erfinv": "calc_erfinv", "digamma": "calc_digamma", "i0": "calc_i0", "i0e": "calc_i0e",
    "i1": "calc_i1", "i1e": "calc_i1e", "erfcx": "calc_erfcx", "ndtri": "calc_ndtri",
    "log_ndtr": "calc_log_ndtr", "airy_ai": "airy_ai_forward",
    "spherical_bessel_j0": "spherical_bessel_j0_forward",
    **{f"bessel_{k}": f"bessel_{k}_forward" for k in ("j0", "j1", "y0", "y1")},
    **{f"{p}modified_bessel_{k}": f"{p}modified_bessel_{k}_forward"
       for p, k in (("", "i0"), ("", "i1"), ("", "k0"), ("", "k1"), ("scaled_", "k0"),
                    ("scaled_", "k1"))},
}
ATEN_BINARY = {"igamma": "calc_igamma", "igammac": "calc_igammac", "zeta": "zeta",
               **{p: f"{p}_forward" for p in POLYNOMIALS}}

CPP_MATH: dict[str, Rule | dict[str, Rule]] = {
    **calls("std::{}({{0}})", "log10 erfc lgamma asinh acosh atanh"),
    **calls("std::{}({{0}}, {{1}})", "hypot fmin fmax copysign nextafter"),
    **{op: float_only(f"{fn}({{0}})") for op, fn in ATEN_UNARY.items()},
    **{op: float_only(f"{fn}({{0}}, {{1}})") for op, fn in ATEN_BINARY.items()},
    "polygamma": float_only("calc_polygamma({1}, static_cast<int>({0}))"),
    # The bits, not std::signbit: g++ 12 crashes (an internal compiler error) vectorizing
    # std::signbit of a float widened from bfloat16.
    "signbit": {"float": "ks_signbit({0})", "int": "({0} < 0)", "uint": "false",
                "bool": "false"},
    "frexp_mantissa": float_only("ks_frexp_mantissa({0})"),
    "frexp_exponent": float_only("ks_frexp_exponent({0})"),
}
CPP_MATH_HELPERS = r"""
static inline bool ks_signbit(float x) { uint32_t u; std::memcpy(&u, &x, 4); return u >> 31; }
static inline bool ks_signbit(double x) { uint64_t u; std::memcpy(&u, &x, 8); return u >> 63; }
template <typename T> static inline T ks_frexp_mantissa(T x) { int e; return std::frexp(x, &e); }
template <typename T> static inline int32_t ks_frexp_exponent(T x) {
  int e; std::frexp(x, &e); return e;
}
"""
_ATEN_CALL = re.compile(r"\b(" + "|".join(sorted(
    {*ATEN_UNARY.values(), *ATEN_BINARY.values(), "calc_polygamma"}, key=len, reverse=True))
    + r")\(")
ATEN_INCLUDE = "#include <ATen/native/Math.h>\n"
TORCH_INCLUDE_DIR = os.path.join(os.path.dirname(torch.__file__), "include")


def needs_aten_math(source: str) -> bool:
    """True if generated C++ calls one of Math.h's functions (the header is then included:
    it costs about a second and a half of g++ time, so only then)."""
    return _ATEN_CALL.search(source) is not None


# fmin/fmax ignore a NaN operand (C's fmin); tl.minimum's NaN handling differs by target.
_FMIN = "tl.where({0} != {0}, {1}, tl.where({1} != {1}, {0}, tl.minimum({0}, {1})))"
_FMAX = "tl.where({0} != {0}, {1}, tl.where({1} != {1}, {0}, tl.maximum({0}, {1})))"
_NOT_FLOAT_SIGNBIT = {k: "({0} < 0)" for k in ("int", "uint", "bool")}

TRITON_MATH: dict[str, Rule | dict[str, Rule]] = {
    **calls("libdevice.{}({{0}})", "log10 erfc erfinv lgamma asinh acosh atanh erfcx"),
    **calls("libdevice.{}({{0}}, {{1}})", "hypot copysign nextafter"),
    **{op: float_only(f"libdevice.{fn}({{0}})") for op, fn in (
        ("i0", "cyl_bessel_i0"), ("i1", "cyl_bessel_i1"), ("modified_bessel_i0", "cyl_bessel_i0"),
        ("modified_bessel_i1", "cyl_bessel_i1"), ("ndtri", "normcdfinv"))},
    # Eager's own polynomials (codegen/bessel.py), not libdevice's j0/y1: those differ from
    # eager's by up to 6e-7 on float64. They run under the interpreter too (tl primitives).
    **{f"bessel_{k}": float_only(f"_ks_bessel_{k}({{0}})") for k in ("j0", "j1", "y0", "y1")},
    "fmin": float_only(_FMIN), "fmax": float_only(_FMAX),
    "signbit": {"float": "(libdevice.signbit({0}) != 0)", **_NOT_FLOAT_SIGNBIT},
}

# The interpreter: formulas over tl primitives (numpy underneath). The sign bit of a zero
# shows in 1/x; the sign bit of a NaN is not seen (signbit(-nan) reads False here).
_SIGNBIT = "(({0} < 0) | (({0} == 0) & ((1.0 / {0}) < 0)))"
TRITON_INTERPRET_MATH: dict[str, Rule | dict[str, Rule]] = {
    "log10": float_only("(tl.log({0}) * 0.4342944819032518)"),
    "erfc": float_only("(1.0 - tl.erf({0}))"),
    "asinh": float_only("_ks_asinh({0})"), "acosh": float_only("_ks_acosh({0})"),
    "atanh": float_only("(0.5 * tl.log((1.0 + {0}) / (1.0 - {0})))"),
    "hypot": float_only("_ks_hypot({0}, {1})"),
    "fmin": float_only(_FMIN), "fmax": float_only(_FMAX),
    "signbit": {"float": _SIGNBIT, **_NOT_FLOAT_SIGNBIT},
    "copysign": float_only(f"tl.where({_SIGNBIT.format('{1}')}, -tl.abs({{0}}), "
                           "tl.abs({0}))"),
}
# Not in the interpreter's table: what only libdevice computes (the inverse trigonometric
# functions too: under the interpreter a libdevice call raises).
TRITON_INTERPRET_DROPS = ("erfinv lgamma erfcx nextafter i0 i1 modified_bessel_i0 "
                          "modified_bessel_i1 ndtri asin acos atan atan2").split()

TRITON_MATH_HELPERS = """

@triton.jit
def _ks_hypot(x, y):
    a = tl.abs(x)
    b = tl.abs(y)
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    q = tl.where(hi == 0.0, 0.0, lo / hi)
    r = hi * tl.sqrt(1.0 + q * q)
    r = tl.where(a != a, a + b, r)  # nested: `|` of a 0-d (scalar) operand's mask fails
    r = tl.where(b != b, a + b, r)
    r = tl.where(a == float('inf'), float('inf'), r)
    return tl.where(b == float('inf'), float('inf'), r)


@triton.jit
def _ks_asinh(x):
    a = tl.abs(x)
    r = tl.where(a > 268435456.0, tl.log(a) + 0.6931471805599453,
                 tl.log(a + tl.sqrt(a * a + 1.0)))
    return tl.where(x < 0, -r, r)


@triton.jit
def _ks_acosh(x):
    return tl.where(x > 268435456.0, tl.log(x) + 0.6931471805599453,
                    tl.log(x + tl.sqrt(x * x - 1.0)))
"""

# Under the interpreter only, in a wrapper whose kernels call it (triton/kernel.py cast_text).
INTERPRET_BF16_HELPER = """

@triton.jit
def _ks_bf16(x):
    # float32 -> bfloat16 rounded to nearest even, as a GPU's cast and eager's round: the
    # interpreter's own cast truncates (numpy has no bfloat16). NaN stays NaN.
    u = x.to(tl.uint32, bitcast=True)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return tl.where(x != x, x.to(tl.bfloat16), r)
"""
