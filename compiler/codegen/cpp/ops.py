"""How C++ kernels spell each op and type: the C++ backend's op table (codegen/optable.py
rules by operand dtype, reductions included) and its C type names. Read by
codegen/cpp/kernel.py's generator and asked by the backend's refusal check.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelscope.compiler.codegen.mathops import CPP_MATH
from kernelscope.compiler.codegen.optable import C_LIKE, OpTable, calls, float_only, merged, numeric
from kernelscope.compiler.ir.ops import combine_op
from kernelscope.compiler.schedule.plan import KernelPlan

C_TYPE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "_Float16",
    torch.bfloat16: "uint16_t", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
}

# Reductions are ops of the table too (optable.combine_op), so the refusal check sees them.
REDUCTIONS: dict[str, Any] = {combine_op(r): rule for r, rule in {
    "sum": "{0} + {1}", "max": "ks_max({0}, {1})", "min": "ks_min({0}, {1})",
    "prod": "{0} * {1}", "any": "{0} || {1}", "all": "{0} && {1}",
    "argmax": "{1} > {0}", "argmin": "{1} < {0}"}.items()}
OPS = OpTable("C++", merged(merged(C_LIKE, {
    **REDUCTIONS,
    "truediv": float_only("{0} / {1}"),
    "floordiv": {"int": "ks_floordiv({0}, {1})", "uint": "{0} / {1}",
                 "float": "std::floor({0} / {1})"},
    "mod": {"int": "ks_mod({0}, {1})", "uint": "{0} % {1}", "float": "ks_mod({0}, {1})"},
    "fmod": {"float": "std::fmod({0}, {1})"},
    "pow": {"float": "std::pow({0}, {1})", "int": "ks_ipow({0}, {1})",
            "uint": "ks_ipow({0}, {1})"},
    "maximum": "ks_max({0}, {1})", "minimum": "ks_min({0}, {1})",
    "logical_and": "{0} && {1}", "logical_or": "{0} || {1}", "logical_xor": "{0} != {1}",
    # On bool operands `&` and `~` would compute in int (~true is -2, which is true).
    "bitwise_and": {"bool": "{0} && {1}"}, "bitwise_or": {"bool": "{0} || {1}"},
    "bitwise_xor": {"bool": "{0} != {1}"}, "bitwise_not": {"bool": "!{0}"},
    "logical_not": "!{0}", "abs": {"uint": "{0}", "bool": "{0}", "*": "std::abs({0})"},
    **calls("std::{}({{0}})", "exp exp2 expm1 log log1p log2 sqrt sin cos tan tanh erf "
                              "asin acos atan sinh cosh"),
    **calls("std::{}({{0}}, {{1}})", "atan2"),
    # Rounding an integer is the integer.
    **{n: {"float": f"std::{f}({{0}})", "*": "{0}"}
       for n, f in (("floor", "floor"), ("ceil", "ceil"), ("trunc", "trunc"),
                    ("round", "nearbyint"))},
    "rsqrt": float_only("1 / std::sqrt({0})"), "reciprocal": float_only("1 / {0}"),
    "sigmoid": float_only("1 / (1 + std::exp(-{0}))"),
    # bool minus bool is an int: cast back, or a float sign would divide as an integer.
    "sign": numeric("static_cast<{t}>(({0} > 0) - ({0} < 0))"),
    "isnan": {"float": "std::isnan({0})", "*": "false"},
    "isinf": {"float": "std::isinf({0})", "*": "false"},
    # -0.0 and NaN stay themselves, as in eager's relu (a max gives +0.0 for -0.0).
    "relu": {**numeric("ks_max({0}, decltype({0})(0))"),
             "float": "({0} < 0 ? decltype({0})(0) : {0})"},
    "where": "{0} ? {1} : {2}",
}), CPP_MATH))
# Arithmetic on 8- and 16-bit integers happens in int in C++; the result wraps like torch's
# only once it is cast back to its type.
NARROW_INTS = (torch.int8, torch.int16, torch.uint8)
WRAPPED_OPS = frozenset("add sub mul floordiv mod fmod pow neg abs bitwise_not sign "
                        "bitwise_and bitwise_or bitwise_xor maximum minimum".split())


def compute_type(dtype: torch.dtype) -> str:
    return "float" if dtype in (torch.float16, torch.bfloat16) else C_TYPE[dtype]


def pointer_params(plan: KernelPlan, names: dict[str, str]) -> list[str]:
    """A kernel's pointer parameters: its inputs read-only, then its stores."""
    return [f"{'const ' if b in plan.inputs else ''}{C_TYPE[plan.buffers[b].dtype]}* "
            f"__restrict__ {names[b]}" for b in plan.inputs + plan.stores]
