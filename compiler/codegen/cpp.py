"""C++ kernels for the CPU: an OpenMP-parallel loop over outputs, inner loops over the
reduction, scalar code that g++ vectorizes (`omp simd` where the loop allows it).

Every kernel is an `extern "C"` function of raw pointers; the wrapper calls it through
ctypes. 16-bit floats are computed in float: `_Float16` converts implicitly, bfloat16
goes through two small helpers.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy
import torch

from compiler.codegen.backend import Backend, BuildError, BuildResult, GeneratedKernel
from compiler.codegen.common import RINDEX, XINDEX, Lines, Scope, Var
from compiler.codegen.kernel import KernelCodegen
from compiler.codegen.optable import OpTable, float_only, numeric
from compiler.ir.indexing import cexpr
from compiler.ir.ops import reduction_identity as identity
from compiler.schedule.nodes import SchedNode
from compiler.schedule.plan import KernelPlan

C_TYPE = {
    torch.float32: "float", torch.float64: "double", torch.float16: "_Float16",
    torch.bfloat16: "uint16_t", torch.int64: "int64_t", torch.int32: "int32_t",
    torch.int16: "int16_t", torch.int8: "int8_t", torch.uint8: "uint8_t", torch.bool: "bool",
}

PRELUDE = r"""#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__x86_64__) && defined(__GLIBC__) && !defined(KS_NO_VECTOR_MATH)
// glibc's vector math library (libmvec, linked through libm): declared SIMD-callable,
// the float functions run 4, 8 or 16 lanes at a time inside `omp simd` loops instead of
// one lane at a time (within 4 ulp, as libmvec documents).
extern "C" {
#define KS_SIMD1(f) __attribute__((simd("notinbranch"))) float f(float) noexcept;
#define KS_SIMD2(f) __attribute__((simd("notinbranch"))) float f(float, float) noexcept;
KS_SIMD1(expf) KS_SIMD1(exp2f) KS_SIMD1(expm1f) KS_SIMD1(logf) KS_SIMD1(log2f)
KS_SIMD1(log10f) KS_SIMD1(log1pf) KS_SIMD1(sinf) KS_SIMD1(cosf) KS_SIMD1(tanf)
KS_SIMD1(asinf) KS_SIMD1(acosf) KS_SIMD1(atanf) KS_SIMD1(sinhf) KS_SIMD1(coshf)
KS_SIMD1(tanhf) KS_SIMD1(asinhf) KS_SIMD1(acoshf) KS_SIMD1(atanhf) KS_SIMD1(erff)
KS_SIMD1(erfcf) KS_SIMD1(cbrtf) KS_SIMD2(powf) KS_SIMD2(atan2f) KS_SIMD2(hypotf)
#undef KS_SIMD1
#undef KS_SIMD2
}
#endif

template <typename T> static inline T ks_max(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> static inline T ks_min(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> static inline T ks_floordiv(T a, T b) {
  T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> static inline T ks_mod(T a, T b) {
  T r = std::fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t ks_mod(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <typename T> static inline T ks_ipow(T a, T b) {
  if (b < 0) return (a == 1) ? 1 : (a == -1) ? ((b % 2) ? -1 : 1) : 0;
  T r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}
static inline float ks_bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16; float f; std::memcpy(&f, &bits, 4); return f;
}
static inline uint16_t ks_float_to_bf16(float f) {
  uint32_t bits; std::memcpy(&bits, &f, 4);
  if (f != f) return 0x7fc0;
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(bits >> 16);
}
"""

OPS = OpTable("C++", {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}",
    "truediv": float_only("{0} / {1}"),
    "floordiv": {"int": "ks_floordiv({0}, {1})", "uint": "{0} / {1}",
                 "float": "std::floor({0} / {1})"},
    # C++'s integer `%` keeps the dividend's sign (fmod's rule); mod takes the divisor's.
    "mod": {"int": "ks_mod({0}, {1})", "uint": "{0} % {1}", "float": "ks_mod({0}, {1})"},
    "fmod": {"int": "{0} % {1}", "uint": "{0} % {1}", "float": "std::fmod({0}, {1})"},
    "pow": {"float": "std::pow({0}, {1})", "int": "ks_ipow({0}, {1})",
            "uint": "ks_ipow({0}, {1})"},
    "maximum": "ks_max({0}, {1})", "minimum": "ks_min({0}, {1})",
    "atan2": float_only("std::atan2({0}, {1})"),
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}",
    "gt": "{0} > {1}", "ge": "{0} >= {1}",
    "logical_and": "{0} && {1}", "logical_or": "{0} || {1}", "logical_xor": "{0} != {1}",
    # On bool operands `&` and `~` would compute in int (~true is -2, which is true).
    "bitwise_and": {"bool": "{0} && {1}", "int": "{0} & {1}", "uint": "{0} & {1}"},
    "bitwise_or": {"bool": "{0} || {1}", "int": "{0} | {1}", "uint": "{0} | {1}"},
    "bitwise_xor": {"bool": "{0} != {1}", "int": "{0} ^ {1}", "uint": "{0} ^ {1}"},
    "logical_not": "!{0}", "bitwise_not": {"bool": "!{0}", "int": "~{0}", "uint": "~{0}"},
    "neg": numeric("-{0}"), "abs": {"uint": "{0}", "bool": "{0}", "*": "std::abs({0})"},
    "exp": float_only("std::exp({0})"), "exp2": float_only("std::exp2({0})"),
    "expm1": float_only("std::expm1({0})"), "log": float_only("std::log({0})"),
    "log1p": float_only("std::log1p({0})"), "log2": float_only("std::log2({0})"),
    "sqrt": float_only("std::sqrt({0})"), "rsqrt": float_only("1 / std::sqrt({0})"),
    "sin": float_only("std::sin({0})"), "cos": float_only("std::cos({0})"),
    "tan": float_only("std::tan({0})"), "tanh": float_only("std::tanh({0})"),
    "sigmoid": float_only("1 / (1 + std::exp(-{0}))"), "erf": float_only("std::erf({0})"),
    "floor": {"float": "std::floor({0})", "*": "{0}"},
    "ceil": {"float": "std::ceil({0})", "*": "{0}"},
    "trunc": {"float": "std::trunc({0})", "*": "{0}"},
    "round": {"float": "std::nearbyint({0})", "*": "{0}"},
    "reciprocal": float_only("1 / {0}"),
    # bool minus bool is an int: cast back, or a float sign would divide as an integer.
    "sign": numeric("static_cast<{t}>(({0} > 0) - ({0} < 0))"),
    "isnan": {"float": "std::isnan({0})", "*": "false"},
    "isinf": {"float": "std::isinf({0})", "*": "false"},
    "relu": numeric("ks_max({0}, decltype({0})(0))"),
    "asin": float_only("std::asin({0})"), "acos": float_only("std::acos({0})"),
    "atan": float_only("std::atan({0})"), "sinh": float_only("std::sinh({0})"),
    "cosh": float_only("std::cosh({0})"),
    "where": "{0} ? {1} : {2}",
})
# Arithmetic on 8- and 16-bit integers happens in int in C++; the result wraps like torch's
# only once it is cast back to its type.
NARROW_INTS = (torch.int8, torch.int16, torch.uint8)
WRAPPED_OPS = frozenset("add sub mul floordiv mod fmod pow neg abs bitwise_not sign "
                        "bitwise_and bitwise_or bitwise_xor maximum minimum".split())
COMBINE = {"sum": "{0} + {1}", "max": "ks_max({0}, {1})", "min": "ks_min({0}, {1})",
           "prod": "{0} * {1}", "any": "{0} || {1}", "all": "{0} && {1}"}
PARALLEL_MIN = 65536  # below this many elements, threads cost more than they save
# Float sums longer than this run in chunks: each chunk in `omp simd` lanes, the chunk
# totals in double, so 16M-element sums stay within float rounding of the true sum.
SUM_CHUNK = 4096
COLUMN_BLOCK = 128  # outputs per block when a reduction is interchanged (column sums)
OMP_OP = {"sum": "+", "max": "max", "min": "min", "prod": "*"}


@dataclass
class CppKernel:
    name: str
    source: str
    line_map: list[dict[str, Any]]
    args: list[str] = field(default_factory=list)


def compute_type(dtype: torch.dtype) -> str:
    return "float" if dtype in (torch.float16, torch.bfloat16) else C_TYPE[dtype]


def literal(value: Any, dtype: torch.dtype) -> str:
    ctype = compute_type(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        v = float(value)
        if math.isinf(v):
            sign = "" if v > 0 else "-"
            return f"{sign}std::numeric_limits<{ctype}>::infinity()"
        if math.isnan(v):
            return f"std::numeric_limits<{ctype}>::quiet_NaN()"
        return f"static_cast<{ctype}>({v!r})"
    return f"static_cast<{ctype}>({int(value)})"


class CppKernelCodegen(KernelCodegen):
    literal = staticmethod(literal)

    def __init__(self, plan: KernelPlan) -> None:
        super().__init__(plan, persistent=False)
        self.table = OPS
        self.simd: list[str] = []  # omp reduction clauses of the open loop
        self.chunked: list[tuple[str, str, str]] = []  # (acc, type, identity): chunked sums
        self.accs: list[tuple[str, str, str]] = []  # every accumulator of the open loop
        self.r_loads: list[sympy.Expr] = []  # indices of the loads inside reduction loops

    def fmt_cast(self, x: Var, dtype: torch.dtype) -> str:
        return f"static_cast<{compute_type(dtype)}>({x.name})"

    def type_name(self, dtype: torch.dtype) -> str:
        return compute_type(dtype)

    def finish_op(self, name: str, text: str, dtype: torch.dtype) -> str:
        if dtype in NARROW_INTS and name in WRAPPED_OPS:
            return f"static_cast<{C_TYPE[dtype]}>({text})"
        return text

    def fmt_index(self, expr: sympy.Expr) -> str:
        return cexpr(expr)

    def fmt_index_value(self, expr: sympy.Expr, dtype: torch.dtype) -> str:
        return f"static_cast<{compute_type(dtype)}>({cexpr(expr)})"

    def write_assign(self, var: Var, expr: str) -> None:
        self.scope.lines.write(f"auto {var.name} = {expr};", self.origins(), self.buffer_names())

    def write_index_var(self, lines: Lines, name: str, text: str) -> None:
        lines.write(f"const int64_t {name} = {text};")

    def load_external(self, name: str, index: sympy.Expr) -> Var:
        index = self.name_subterms(index)
        buf = self.plan.buffers[name]
        expr = f"{self.args[name]}[{cexpr(index)}]"
        if buf.dtype == torch.bfloat16:
            expr = f"ks_bf16_to_float({expr})"
        elif buf.dtype == torch.float16:
            expr = f"static_cast<float>({expr})"
        domain = self.domain_of(index)
        if domain == "r":
            self.r_loads.append(index)
        return self.emit(expr, buf.dtype, domain)

    def store(self, name: str, index: sympy.Expr, value: Var) -> None:
        index = self.name_subterms(index)
        dtype = self.plan.buffers[name].dtype
        v = value.name
        if dtype == torch.bfloat16:
            v = f"ks_float_to_bf16({v})"
        elif value.dtype != dtype or dtype == torch.float16:
            v = f"static_cast<{C_TYPE[dtype]}>({v})"
        lines = self.post if (self.post is not None and value.domain == "x"
                              and self.plan.kind == "reduction") else self.scope.lines
        lines.write(f"{self.args[name]}[{cexpr(index)}] = {v};",
                    self.origins() or tuple(sorted(self.plan.written[name].origins)), (name,))

    def masked_body(self, mask: Var, body: Callable[[], Any], other: Any) -> Var:
        outer = self.scope
        inner_lines = Lines()
        self.scope = Scope(inner_lines, outer)
        try:
            value = body()
        finally:
            self.scope = outer
        if not isinstance(value, Var):
            value = self.constant(value, torch.float32)
        var = Var(self.new_var(), value.dtype, "r" if "r" in (mask.domain, value.domain) else "x")
        lines = outer.lines
        lines.write(f"{compute_type(value.dtype)} {var.name} = {literal(other, value.dtype)};",
                    self.origins())
        lines.write(f"if ({mask.name}) {{")
        with lines.indent():
            lines.extend(inner_lines)
            lines.write(f"{var.name} = {value.name};", self.origins())
        lines.write("}")
        return var

    def reduce(self, node: SchedNode, value: Var) -> Var:
        assert self.pre is not None and self.post is not None
        data = node.buffer.data  # type: ignore[attr-defined]
        rtype, src = data.reduction_type, value.dtype
        origins = self.origins() or tuple(sorted(node.buffer.origins))
        ctype = compute_type(src)
        result = Var(self.new_var(), node.buffer.dtype, "x")
        acc = f"acc_{result.name}"
        init = literal(identity(rtype, src), src)
        lines = self.scope.lines
        if rtype == "sum" and src.is_floating_point and self.plan.rnumel > SUM_CHUNK:
            self.pre.write(f"double {acc}_total = 0;", origins, (node.name,))
            self.chunked.append((acc, ctype, init))
            lines.write(f"{acc} = {acc} + {value.name};", origins, (node.name,))
            self.post.write(f"auto {result.name} = static_cast<{ctype}>({acc}_total);",
                            origins, (node.name,))
            self.simd.append(f"reduction(+:{acc})")
            return result
        self.pre.write(f"{ctype} {acc} = {init};", origins, (node.name,))
        self.accs.append((acc, ctype, init))
        if rtype in ("argmax", "argmin"):
            cmp = ">" if rtype == "argmax" else "<"
            self.pre.write(f"int64_t {acc}_idx = 0;", origins, (node.name,))
            lines.write(f"if ({value.name} {cmp} {acc} || ({acc}_idx == 0 && rindex == 0)) "
                        f"{{ {acc} = {value.name}; {acc}_idx = rindex; }}", origins, (node.name,))
            self.post.write(f"auto {result.name} = {acc}_idx;", origins, (node.name,))
            self.simd.append("")  # comparisons with a branch: no simd clause
            return result
        lines.write(f"{acc} = {COMBINE[rtype].format(acc, value.name)};", origins, (node.name,))
        self.post.write(f"auto {result.name} = {acc};", origins, (node.name,))
        self.simd.append(f"reduction({OMP_OP[rtype]}:{acc})" if rtype in OMP_OP else "")
        return result

    # -- assembling the kernel ----------------------------------------------------------
    def generate(self, header: list[str]) -> Lines:
        plan = self.plan
        out = Lines()
        params = [f"const {C_TYPE[plan.buffers[b].dtype]}* __restrict__ {self.args[b]}"
                  for b in plan.inputs]
        params += [f"{C_TYPE[plan.buffers[b].dtype]}* __restrict__ {self.args[b]}"
                   for b in plan.stores]
        out.write(f'extern "C" void {plan.name}({", ".join(params)})')
        out.write("{")
        with out.indent():
            for h in header:
                out.write(f"// {h}")
            body = self._pointwise_body() if plan.kind == "pointwise" else self._reduction_body()
            out.extend(body)
        out.write("}")
        return out

    def _pointwise_body(self) -> Lines:
        for node in self.plan.nodes:
            self.codegen_node(node)
        out = Lines()
        if self.plan.xnumel >= PARALLEL_MIN:
            out.write("#pragma omp parallel for simd")
        out.write(f"for (int64_t xindex = 0; xindex < {self.plan.xnumel}; xindex++)")
        out.write("{")
        with out.indent():
            out.extend(self.prologue)
            out.extend(self.body)
        out.write("}")
        return out

    def _reduction_body(self) -> Lines:
        inner = Lines()
        single_row = self.plan.xnumel == 1
        segments = self.segments()
        loops = []
        for kind, nodes in segments:
            self.simd, self.chunked, self.accs = [], [], []
            loop = self.run_segment(kind, nodes, inner)
            if loop is None:
                continue
            assert self.pre is not None and self.post is not None
            assert self.r_index_lines is not None
            loops.append((self.pre, loop, self.r_index_lines, self.post, list(self.accs)))
            if len(loops) == 1 and len(segments) == 1 and self._columns_ok(nodes):
                return self._column_body(*loops[0])
            inner.extend(self.pre)
            clauses = [c for c in self.simd if c]
            plain = bool(self.simd) and all(self.simd)
            stores = any(n.name in self.plan.stores and n.kind != "reduction" for n in nodes)
            parallel = single_row and plain and not stores and self.plan.rnumel >= PARALLEL_MIN
            simd = f"#pragma omp simd {' '.join(clauses)}".rstrip() \
                if plain or not self.simd else None
            if self.chunked:
                self._chunked_loop(inner, loop, clauses, parallel, simd)
            else:
                if parallel:
                    inner.write(f"#pragma omp parallel for {' '.join(clauses)}")
                elif simd:
                    inner.write(simd)
                inner.write(f"for (int64_t rindex = 0; rindex < {self.plan.rnumel}; rindex++)")
                inner.write("{")
                with inner.indent():
                    inner.extend(self.r_index_lines)
                    inner.extend(loop)
                inner.write("}")
            inner.extend(self.post)
            self.pre = self.post = None
        out = Lines()
        if not single_row and self.plan.xnumel * self.plan.rnumel >= PARALLEL_MIN:
            out.write("#pragma omp parallel for")
        out.write(f"for (int64_t xindex = 0; xindex < {self.plan.xnumel}; xindex++)")
        out.write("{")
        with out.indent():
            out.extend(self.prologue)
            out.extend(inner)
        out.write("}")
        return out


    def _chunked_loop(self, out: Lines, loop: Lines, clauses: list[str], parallel: bool,
                      simd: str | None) -> None:
        """The reduction loop in chunks of SUM_CHUNK: chunk sums in float lanes, totals in
        double (pairwise enough for any length we compile, and still vectorized)."""
        assert self.r_index_lines is not None
        rn = self.plan.rnumel
        sums = {acc for acc, _, _ in self.chunked}
        if parallel:
            outer = [c for c in clauses if c.split(":")[-1].rstrip(")") not in sums]
            outer += [f"reduction(+:{acc}_total)" for acc in sorted(sums)]
            out.write(f"#pragma omp parallel for {' '.join(outer)}")
        out.write(f"for (int64_t rchunk = 0; rchunk < {rn}; rchunk += {SUM_CHUNK})")
        out.write("{")
        with out.indent():
            out.write(f"const int64_t rend = std::min<int64_t>(rchunk + {SUM_CHUNK}, {rn});")
            for acc, ctype, init in self.chunked:
                out.write(f"{ctype} {acc} = {init};")
            if simd:
                out.write(simd)
            out.write("for (int64_t rindex = rchunk; rindex < rend; rindex++)")
            out.write("{")
            with out.indent():
                out.extend(self.r_index_lines)
                out.extend(loop)
            out.write("}")
            for acc, _, _ in self.chunked:
                out.write(f"{acc}_total += {acc};")
        out.write("}")

    def _columns_ok(self, nodes: list[SchedNode]) -> bool:
        """Reduce across rows with outputs contiguous (x.sum(0)): every load steps 1 along
        the outputs and more than 1 along the reduction, so loop over outputs innermost."""
        if self.plan.xnumel < 16 or self.chunked or len(self.accs) != len(self.simd):
            return False
        if not self.r_loads or any(not c for c in self.simd):
            return False
        for index in self.r_loads:
            if not index.free_symbols <= {XINDEX, RINDEX}:
                return False
            dx, dr = sympy.diff(index, XINDEX), sympy.diff(index, RINDEX)
            if dx != 1 or not (dr.is_Integer and dr > 1):
                return False
        return not any(n.name in self.plan.stores and n.kind != "reduction" for n in nodes)

    def _column_body(self, pre: Lines, loop: Lines, r_index: Lines, post: Lines,
                     accs: list[tuple[str, str, str]]) -> Lines:
        """Blocks of COLUMN_BLOCK outputs: for each row, one `omp simd` pass over the
        block's contiguous outputs, accumulating into a per-block array."""
        xn, rn, xb = self.plan.xnumel, self.plan.rnumel, COLUMN_BLOCK
        out = Lines()
        if xn * rn >= PARALLEL_MIN:
            out.write("#pragma omp parallel for")
        out.write(f"for (int64_t xblock = 0; xblock < {xn}; xblock += {xb})")
        out.write("{")
        with out.indent():
            out.write(f"const int64_t xend = std::min<int64_t>(xblock + {xb}, {xn});")
            for acc, ctype, init in accs:
                out.write(f"{ctype} {acc}_v[{xb}];")
                out.write(f"for (int64_t i = 0; i < {xb}; i++) {acc}_v[i] = {init};")
            out.write(f"for (int64_t rindex = 0; rindex < {rn}; rindex++)")
            out.write("{")
            with out.indent():
                out.write("#pragma omp simd")
                out.write("for (int64_t xindex = xblock; xindex < xend; xindex++)")
                out.write("{")
                with out.indent():
                    for acc, ctype, _ in accs:
                        out.write(f"{ctype}& {acc} = {acc}_v[xindex - xblock];")
                    out.extend(self.prologue)
                    out.extend(r_index)
                    out.extend(loop)
                out.write("}")
            out.write("}")
            out.write("for (int64_t xindex = xblock; xindex < xend; xindex++)")
            out.write("{")
            with out.indent():
                for acc, ctype, _ in accs:
                    out.write(f"{ctype} {acc} = {acc}_v[xindex - xblock];")
                out.extend(self.prologue)
                out.extend(post)
            out.write("}")
        out.write("}")
        return out


def generate_cpp(plan: KernelPlan, header: list[str]) -> CppKernel:
    gen = CppKernelCodegen(plan)
    lines = gen.generate(header)
    line_map = [{"line": i + 1, "origins": list(ln.origins), "buffers": list(ln.buffers)}
                for i, ln in enumerate(lines.lines) if ln.origins or ln.buffers]
    return CppKernel(plan.name, lines.text(), line_map, plan.inputs + plan.stores)


CXX = os.environ.get("CXX", "g++")
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17",
         "-fno-math-errno", "-Wno-unused-variable"]


class CppBackend(Backend):
    """C++ for the CPU, built with g++ into one shared library per graph."""

    name = "cpp"
    label = "C++"
    language = "cpp"
    devices = ("cpu",)
    source_suffix = ".cpp"

    def generate(self, plan: KernelPlan, header: list[str]) -> GeneratedKernel:
        k = generate_cpp(plan, header)
        launch = f"{k.name}({', '.join(f'ptr({a})' for a in k.args)})"
        return GeneratedKernel(k.name, k.source, k.line_map, k.args, launch)

    def wrapper_prelude(self, kernels: list[GeneratedKernel], artifact: Path | None
                        ) -> list[str]:
        lines = ["from compiler.runtime.cpp_build import load_library", "",
                 f"_lib = load_library({str(artifact)!r})"]
        lines += [f"{k.name} = cpp_kernel(_lib, {k.name!r}, {len(k.args)})" for k in kernels]
        return lines

    def build_source(self, kernels: list[GeneratedKernel]) -> str:
        return PRELUDE + "\n" + "\n".join(k.source for k in kernels)

    def artifact_path(self, source_path: Path) -> Path | None:
        return source_path.with_suffix(".so")

    def build(self, source_path: Path | None) -> BuildResult:
        assert source_path is not None
        lib = source_path.with_suffix(".so")
        if lib.exists():
            return BuildResult(lib, True, 0.0)
        start = time.perf_counter()
        tmp = lib.with_suffix(f".so.tmp{os.getpid()}")
        proc = subprocess.run([CXX, *FLAGS, str(source_path), "-o", str(tmp)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"g++ failed to build {source_path.name}",
                             _kernel_at_error(source_path.read_text(), proc.stderr),
                             proc.stderr[-4000:])
        os.replace(tmp, lib)
        return BuildResult(lib, False, (time.perf_counter() - start) * 1000)


def _kernel_at_error(source: str, stderr: str) -> str | None:
    m = re.search(r":(\d+):\d+: error", stderr)
    if not m:
        return None
    line = int(m.group(1))
    current = None
    for i, text in enumerate(source.splitlines(), 1):
        k = re.match(r'extern "C" void (\w+)\(', text)
        if k:
            current = k.group(1)
        if i >= line:
            break
    return current
