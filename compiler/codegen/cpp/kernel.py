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
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sympy
import torch

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.codegen.backend import Backend, BuildError, BuildResult, GeneratedKernel
from kernelscope.compiler.codegen.common import RINDEX, XINDEX, Lines, Scope, Var
from kernelscope.compiler.codegen.cpp.asm import asm_report
from kernelscope.compiler.codegen.cpp.columns import Columns, chunks, column_body
from kernelscope.compiler.codegen.cpp.combo import combo_lines
from kernelscope.compiler.codegen.cpp.dedup import library_kernels
from kernelscope.compiler.codegen.cpp.ops import (
    C_TYPE,
    NARROW_INTS,
    OPS,
    WRAPPED_OPS,
    compute_type,
    pointer_params,
)
from kernelscope.compiler.codegen.cpp.prefetch import Access, LaneAcc, next_row, write_chunked
from kernelscope.compiler.codegen.cpp.prelude import PRELUDE
from kernelscope.compiler.codegen.kernel import Block, KernelCodegen, var_domain
from kernelscope.compiler.codegen.mathops import (
    ATEN_INCLUDE,
    CPP_MATH_HELPERS,
    TORCH_INCLUDE_DIR,
    needs_aten_math,
)
from kernelscope.compiler.codegen.optable import OpTable
from kernelscope.compiler.codegen.tiling import YINDEX, choose_rows
from kernelscope.compiler.codegen.walks import split_vars, walks_columns
from kernelscope.compiler.features import Feature
from kernelscope.compiler.ir.index_print import cexpr
from kernelscope.compiler.ir.indexing import FloorDiv, ModularIndexing, simplify_index
from kernelscope.compiler.ir.ops import combine_op, reduction_identity
from kernelscope.compiler.schedule.nodes import SchedNode
from kernelscope.compiler.schedule.plan import ComboPlan, KernelPlan

PARALLEL_MIN = 65536  # below this many elements, threads cost more than they save
# Float sums longer than this run in chunks (the threads' unit of work when one long sum
# is all the kernel does): each chunk in `omp simd` lanes, the chunk totals in double.
SUM_CHUNK = 4096
# What a float sum adds in, in a loop over the row: double, as eager's CPU batch norm does
# (float lanes tipped the zoo's MobileNetV2 step on an AVX2 host: docs/correctness.md).
WIDE_SUM = "double"
OUTER_PARALLEL_MIN = 16  # fewer rows than this: the threads split each row instead
# Rows up to this long keep a costly per-element value (a libm call: softmax's exp) that
# the next loop over the row needs again in a stack array, instead of computing it twice.
ROW_KEEP_MAX = 8192
COSTLY = re.compile(r"std::(?!numeric_limits)\w+\(")
TMP = re.compile(r"\btmp\d+\b")
# Reductions OpenMP can split across simd lanes (and threads). any/all too: amax's NaN
# check is an any(isnan) in the same loop, and without its clause the loop stays scalar.
OMP_OP = {"sum": "+", "max": "max", "min": "min", "prod": "*", "any": "||", "all": "&&"}


@dataclass
class CppKernel:
    name: str
    source: str
    line_map: list[dict[str, Any]]
    args: list[str] = field(default_factory=list)


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


@dataclass
class CppLoop(Block):
    """A loop block and what its `omp` pragmas need to know about its accumulators."""

    simd: list[str] = field(default_factory=list)  # per accumulator: its omp clause or ""
    chunked: list[tuple[str, str, str]] = field(default_factory=list)  # (acc, type, init)
    accs: list[tuple[str, str, str]] = field(default_factory=list)  # the unchunked ones
    combine: dict[str, Callable[[str, str], str]] = field(default_factory=dict)  # per acc
    float_sums: set[str] = field(default_factory=set)  # the accs that add floats
    r_loads: list[sympy.Expr] = field(default_factory=list)  # indices of its loads
    reads: list[Access] = field(default_factory=list)  # its loads along the row
    writes: list[Access] = field(default_factory=list)  # its stores along the row


class CppKernelCodegen(KernelCodegen):
    literal = staticmethod(literal)
    comment = "//"

    def __init__(self, plan: KernelPlan, index_checks: bool = False) -> None:
        super().__init__(plan, index_checks)
        self.table = OPS
        self.rows = choose_rows(plan)  # pointwise over (yindex, xindex), or flat
        self.same_as: dict[str, str] = {}  # a value of this loop -> the previous loop's
        self.kept: dict[str, str] = {}  # the previous loop's value -> the array keeping it
        self.span = False  # a combo kernel's part: runs [start, end) of its outer loop
        if self.rows is not None:
            self.bounds[YINDEX], self.bounds[XINDEX] = self.rows[0] - 1, self.rows[1] - 1
            self.symbol_domains[YINDEX] = "x"

    def pointwise_vars(self, ranges: list[int]) -> list[Any]:
        if self.rows is None:
            return super().pointwise_vars(ranges)
        return split_vars(ranges, self.rows[0], YINDEX, XINDEX, self.rows[1])

    def fmt_cast(self, x: Var, dtype: torch.dtype) -> str:
        # 16-bit floats are computed in float, but a conversion to one rounds, as eager's
        # `.to(torch.bfloat16)` does (and as Triton's `.to(tl.bfloat16)`): what the next
        # op reads is the rounded value, not the float it came from.
        if dtype == torch.bfloat16:
            return f"ks_bf16_to_float(ks_float_to_bf16(static_cast<float>({x.name})))"
        if dtype == torch.float16:
            return f"static_cast<float>(static_cast<{C_TYPE[dtype]}>({x.name}))"
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
        self.block.scope.lines.write(f"auto {var.name} = {expr};", self.origins(),
                                     self.buffer_names())

    def emit(self, expr: str, dtype: torch.dtype, domain: str) -> Var:
        """As the base, but a loop over the row that computes a costly value the previous
        loop over the same row computed (the same expression of the same values) reads it
        from the array that loop kept it in."""
        prev = self._previous_loop()
        key = f"{expr}::{dtype}"
        if prev is None or self.block.scope.get(key) is not None:  # the base's CSE hit
            return super().emit(expr, dtype, domain)
        renamed = TMP.sub(lambda m: self.same_as.get(m.group(0), m.group(0)), expr)
        same = prev.scope.cache.get(f"{renamed}::{dtype}")
        if same is not None and same.domain == "r" and COSTLY.search(expr):
            var = super().emit(self._keep(prev, same), dtype, domain)
            self.block.scope.cache[key] = var
        else:
            var = super().emit(expr, dtype, domain)
        if same is not None:
            self.same_as[var.name] = same.name
        return var

    def _previous_loop(self) -> CppLoop | None:
        """The loop block before the current one, where values may be kept for it."""
        if not isinstance(self.block, CppLoop) or self.plan.xnumel == 1 or \
                self.plan.rnumel > ROW_KEEP_MAX:
            return None
        loops = [b for b in self.blocks if isinstance(b, CppLoop)]
        return loops[-2] if len(loops) > 1 and loops[-1] is self.block else None

    def _keep(self, prev: CppLoop, value: Var) -> str:
        """Where `prev` keeps `value` for this loop (an lvalue at rindex): the element of
        this loop's output it becomes (`_output_slot`), else a stack array."""
        slot = self.kept.get(value.name)
        if slot is None:
            assert prev.pre is not None
            slot = self._output_slot(value)
            if slot is None or slot in self.kept.values():  # one value per element
                row = f"row_{value.name}"
                prev.pre.write(f"{compute_type(value.dtype)} {row}[{self.plan.rnumel}];")
                slot = f"{row}[rindex]"
            self.kept[value.name] = slot
            prev.body.write(f"{slot} = {value.name};")
        return slot

    def _output_slot(self, value: Var) -> str | None:
        """The output element this loop's last node stores at (xindex, rindex), where the
        kept value can wait unrounded: that store comes after every read of it, and no
        other iteration touches the element (its lines are fetched by the costly loop)."""
        node = self.block.nodes[-1] if self.block.nodes else None
        if node is None or node.name not in self.plan.stores or node.kind.reduces:
            return None
        buf = self.plan.buffers[node.name]
        if C_TYPE[buf.dtype] != compute_type(value.dtype) or \
                compute_type(buf.dtype) != C_TYPE[buf.dtype]:
            return None
        xs, _ = self.node_vars(node)
        index = simplify_index(node.buffer.layout.index(xs), self.bounds)
        if not index.free_symbols <= {XINDEX, RINDEX} or RINDEX not in index.free_symbols or \
                index.atoms(FloorDiv, ModularIndexing):
            return None
        return f"{self.args[node.name]}[{cexpr(index)}]"

    def write_index_var(self, lines: Lines, name: str, text: str) -> None:
        lines.write(f"const int64_t {name} = {text};")

    def loop_block(self) -> CppLoop:
        body = Lines()
        return CppLoop(body, Scope(body, self.kernel_scope), index=Lines(), pre=Lines(),
                       post=Lines())

    def load_expr(self, name: str, index: sympy.Expr, dtype: torch.dtype, domain: str) -> str:
        if domain == "r" and isinstance(self.block, CppLoop):
            self.block.r_loads.append(index)
            self.block.reads.append(Access(self.args[name], index, dtype))
        expr = f"{self.args[name]}[{cexpr(index)}]"
        if dtype == torch.bfloat16:
            return f"ks_bf16_to_float({expr})"
        if dtype == torch.float16:
            return f"static_cast<float>({expr})"
        return expr

    def store_line(self, name: str, index: sympy.Expr, value: Var, domain: str) -> str:
        dtype = self.plan.buffers[name].dtype
        if domain == "r" and isinstance(self.block, CppLoop):
            self.block.writes.append(Access(self.args[name], index, dtype, write=True))
        v = value.name
        if dtype == torch.bfloat16:
            v = f"ks_float_to_bf16({v})"
        elif value.dtype != dtype or dtype == torch.float16:
            v = f"static_cast<{C_TYPE[dtype]}>({v})"
        return f"{self.args[name]}[{cexpr(index)}] = {v};"

    def index_check(self, x: Var, size: int) -> str:
        return (f"if ({x.name} < 0 || {x.name} >= {size}) "
                f"ks_index_error(\"{self.plan.name}\", {x.name}, {size});")

    def masked(self, mask: Var, body: Callable[[], Any], other: Any) -> Var:
        with self.sub_scope() as inner_lines:
            value = body()
        value = self._as_var(value, torch.float32)
        var = Var(self.new_var(), value.dtype, var_domain(mask, value))
        lines = self.block.scope.lines
        lines.write(f"{compute_type(value.dtype)} {var.name} = {literal(other, value.dtype)};",
                    self.origins())
        lines.write(f"if ({mask.name}) {{")
        with lines.indent():
            lines.extend(inner_lines)
            lines.write(f"{var.name} = {value.name};", self.origins())
        lines.write("}")
        return var

    def reduce(self, node: SchedNode, value: Var) -> Var:
        block = self.block
        assert isinstance(block, CppLoop) and block.pre is not None and block.post is not None
        data = node.buffer.data  # type: ignore[attr-defined]
        rtype, src = data.reduction_type, value.dtype
        ctype = compute_type(src)
        result = Var(self.new_var(), node.buffer.dtype, "x")
        acc = f"acc_{result.name}"
        init = literal(reduction_identity(rtype, src), src)
        lines = block.scope.lines
        wide = rtype == "sum" and ctype == "float"  # adds in WIDE_SUM in a row loop
        if rtype == "sum" and src.is_floating_point and self.plan.rnumel > SUM_CHUNK:
            self.write_for(block.pre, node, f"double {acc}_total = 0;")
            block.chunked.append((acc, ctype, init))
            self.write_for(lines, node, f"{acc} = {acc} + {value.name};")
            self.write_for(block.post, node,
                           f"auto {result.name} = static_cast<{ctype}>({acc}_total);")
            block.simd.append(f"reduction(+:{acc})")
            return result
        # The plain loop's accumulator is wide; lanes (columns, prefetch) keep `ctype`.
        self.write_for(block.pre, node,
                       f"{WIDE_SUM} {acc} = 0;" if wide else f"{ctype} {acc} = {init};")
        block.accs.append((acc, ctype, init))
        rule = self.table.render(combine_op(rtype), [acc, value.name], [src], ctype)
        if rtype in ("argmax", "argmin"):  # `rule`: the value is better than acc
            self.write_for(block.pre, node, f"int64_t {acc}_idx = 0;")
            self.write_for(lines, node,
                           f"if ({rule} || ({acc}_idx == 0 && rindex == 0)) "
                           f"{{ {acc} = {value.name}; {acc}_idx = rindex; }}")
            self.write_for(block.post, node, f"auto {result.name} = {acc}_idx;")
            block.simd.append("")  # comparisons with a branch: no simd clause
            return result
        self.write_for(lines, node, f"{acc} = {rule};")
        self.write_for(block.post, node, f"auto {result.name} = static_cast<{ctype}>({acc});"
                       if wide else f"auto {result.name} = {acc};")
        if wide:
            block.float_sums.add(acc)
        block.combine[acc] = lambda a, b: self.table.render(combine_op(rtype), [a, b], [src],
                                                            ctype)
        block.simd.append(f"reduction({OMP_OP[rtype]}:{acc})" if rtype in OMP_OP else "")
        return result

    # -- assembling the kernel ----------------------------------------------------------
    def assemble(self, header: list[str], body: Lines) -> Lines:
        plan = self.plan
        out = Lines()
        params = pointer_params(plan, self.args)
        if self.span:
            params += ["int64_t start", "int64_t end"]
        linkage = "static void" if self.span else 'extern "C" void'
        with out.braced(f'{linkage} {plan.name}({", ".join(params)})'):
            self.write_header(out, header)
            out.extend(body)
        return out

    def pointwise_body(self) -> Lines:
        """The flat loop, or rows outside and a row inside. A combo part (`span`) runs over
        [start, end) of its outer loop; the combo's OpenMP loop (codegen/cpp/combo.py)
        runs the parts in parallel, so none starts threads here."""
        parallel = self.plan.xnumel >= PARALLEL_MIN
        threads = parallel and not self.span
        span = ("start", "end") if self.span else None
        if self.rows is None:
            pragma = "#pragma omp parallel for simd" if threads else "#pragma omp simd"
            return self._x_loop(super().pointwise_body(), pragma if parallel else None,
                                bounds=span)
        y, x = self.rows
        outer = threads and y >= OUTER_PARALLEL_MIN
        out = Lines()
        if outer:
            out.write("#pragma omp parallel for")
        lo, hi = span or ("0", str(y))
        with out.braced(f"for (int64_t yindex = {lo}; yindex < {hi}; yindex++)"):
            out.extend(self._x_loop(super().pointwise_body(), "#pragma omp parallel for simd"
                                    if threads and not outer else "#pragma omp simd", x))
        return out

    def reduction_body(self) -> Lines:
        inner = super().reduction_body()
        first, *epilogues = self.blocks
        # One loop, then only per-output epilogues (a max's NaN fix-up): those run after
        # the walk's own per-output lines.
        if all(b.pre is None for b in epilogues) and self._columns_ok(first):
            return self._column_body(first, epilogues)  # type: ignore[arg-type]
        parallel = self.plan.xnumel > 1 and \
            self.plan.xnumel * self.plan.rnumel >= PARALLEL_MIN
        return self._x_loop(inner, "#pragma omp parallel for" if parallel else None)

    def _x_loop(self, body: Lines, pragma: str | None, xnumel: int | None = None,
                bounds: tuple[str, str] | None = None) -> Lines:
        out = Lines()
        if pragma:
            out.write(pragma)
        lo, hi = bounds or ("0", str(xnumel or self.plan.xnumel))
        with out.braced(f"for (int64_t xindex = {lo}; xindex < {hi}; xindex++)"):
            out.extend(self.prologue)
            out.extend(body)
        return out

    def write_loop(self, out: Lines, block: Block) -> None:
        assert isinstance(block, CppLoop) and block.index is not None
        clauses = [c for c in block.simd if c]
        plain = bool(block.simd) and all(block.simd)
        stores = any(n.name in self.plan.stores and not n.kind.reduces for n in block.nodes)
        parallel = self.plan.xnumel == 1 and plain and not stores and \
            self.plan.rnumel >= PARALLEL_MIN
        simd = f"#pragma omp simd {' '.join(clauses)}".rstrip() \
            if plain or not block.simd else None
        if block.chunked:
            self._chunked_loop(out, block, clauses, parallel, simd)
            return
        prefetch = self._prefetched(block) if simd and not parallel else []
        if prefetch:
            lanes = [LaneAcc(acc, ctype, init, block.combine[acc])
                     for acc, ctype, init in block.accs]
            write_chunked(out, prefetch, self.plan.xnumel, self.plan.rnumel, simd, lanes,
                          lambda start, end, refs: self._r_loop(out, block, start, end, refs))
            return
        if parallel:
            out.write(f"#pragma omp parallel for {' '.join(clauses)}")
        elif simd:
            out.write(simd)
        self._r_loop(out, block, "0", str(self.plan.rnumel))

    def _prefetched(self, block: CppLoop) -> list[Access]:
        """What the second of several loops over each row prefetches of the next row
        (codegen/cpp/prefetch.py): the first loop's reads, every loop's writes."""
        loops = [b for b in self.blocks if isinstance(b, CppLoop)]
        if len(loops) < 2 or block is not loops[1] or self.plan.xnumel == 1:
            return []
        return next_row(loops[0].reads + [w for b in loops for w in b.writes],
                        self.plan.rnumel)

    def _r_loop(self, out: Lines, block: Block, start: str, end: str,
                refs: Sequence[str] = ()) -> None:
        assert block.index is not None
        with out.braced(f"for (int64_t rindex = {start}; rindex < {end}; rindex++)"):
            for ref in refs:
                out.write(ref)
            out.extend(block.index)
            out.extend(block.body)

    def _chunked_loop(self, out: Lines, block: CppLoop, clauses: list[str], parallel: bool,
                      simd: str | None) -> None:
        """The reduction loop in chunks of SUM_CHUNK: chunk sums in float lanes, totals in
        double (pairwise enough for any length we compile, and still vectorized)."""
        rn = self.plan.rnumel
        sums = {acc for acc, _, _ in block.chunked}
        if parallel:
            outer = [c for c in clauses if c.split(":")[-1].rstrip(")") not in sums]
            outer += [f"reduction(+:{acc}_total)" for acc in sorted(sums)]
            out.write(f"#pragma omp parallel for {' '.join(outer)}")
        with chunks(out, "rchunk", "rend", rn, SUM_CHUNK):
            for acc, ctype, init in block.chunked:
                out.write(f"{WIDE_SUM} {acc} = 0;" if ctype == "float"
                          else f"{ctype} {acc} = {init};")
            if simd:
                out.write(simd)
            self._r_loop(out, block, "rchunk", "rend")
            for acc, _, _ in block.chunked:
                out.write(f"{acc}_total += {acc};")

    def _columns_ok(self, block: Block) -> bool:
        """Reduce across rows with outputs contiguous (x.sum(0)): every load steps 1 along
        the outputs and more than 1 along the reduction, so loop over outputs innermost."""
        if not isinstance(block, CppLoop) or self.plan.xnumel < 16:
            return False
        if len(block.accs) + len(block.chunked) != len(block.simd) or \
                any(not c for c in block.simd):
            return False
        if not walks_columns(block.r_loads):
            return False
        # Stores after the loop (a max's NaN fix-up) are per output, as the walk's own are.
        return not block.row_stores

    def _column_body(self, block: CppLoop, epilogues: list[Block]) -> Lines:
        assert block.index is not None and block.post is not None
        post = Lines()
        post.extend(block.post)
        for epilogue in epilogues:
            post.extend(epilogue.body)
        # A sum over more than SUM_CHUNK rows was made a chunked accumulator (its post reads
        # `{acc}_total`); the column walk keeps its own double totals instead of chunks.
        chunked = [acc for acc, _, _ in block.chunked]
        float_sums = block.float_sums | {acc for acc, ctype, _ in block.chunked
                                         if ctype == "float"}
        return column_body(Columns(self.plan.xnumel, self.plan.rnumel,
                                   block.accs + block.chunked, sorted(float_sums), block.index,
                                   block.body, post, self.prologue, chunked), PARALLEL_MIN)


def generate_cpp(plan: KernelPlan, header: list[str], index_checks: bool = False) -> CppKernel:
    if isinstance(plan, ComboPlan):
        lines = combo_lines(plan, header, PARALLEL_MIN, CppKernelCodegen, index_checks)
    else:
        lines = CppKernelCodegen(plan, index_checks).generate(header)
    return CppKernel(plan.name, lines.text(), lines.line_map(), plan.inputs + plan.stores)


CXX = os.environ.get("CXX", "g++")
# -g: the line table that maps each kernel's assembly to its source (it changes no code).
# -mprefer-vector-width=512: where the CPU has AVX-512, 16-lane loops and libmvec calls
# (g++ prefers 8 lanes otherwise); a preference only, so other CPUs build as before.
# -fno-trapping-math (values unchanged, as in Inductor's flags): else g++ 12 leaves a float
# select feeding a WIDE_SUM (relu(x).sum()) scalar, with a branch.
FLAGS = ["-O3", "-g", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-shared",
         "-fPIC", "-std=c++17", "-fno-math-errno", "-fno-trapping-math",
         "-Wno-unused-variable", "-I", TORCH_INCLUDE_DIR]


class CppBackend(Backend):
    """C++ for the CPU, built with g++ into one shared library per graph."""

    target = targets.by_name("cpp")
    source_suffix = ".cpp"
    # eager's CPU softmax (_vec_softmax_lastdim) multiplies by 1/sum
    features = frozenset({Feature.SOFTMAX_RECIPROCAL})

    def cache_identity(self) -> dict[str, str]:
        return {**super().cache_identity(), "cxx": CXX}

    def op_table(self) -> OpTable:
        return OPS

    def combo_refusal(self, plan: KernelPlan) -> str | None:
        return None

    def generate(self, plan: KernelPlan, header: list[str]) -> GeneratedKernel:
        k = generate_cpp(plan, header, self.options.debug_index_asserts)
        launch = f"{k.name}({', '.join(f'ptr({a})' for a in k.args)})"
        return GeneratedKernel(k.name, k.source, k.line_map, k.args, launch)

    def wrapper_prelude(self, kernels: list[GeneratedKernel], artifact: Path | None
                        ) -> list[str]:
        lines = ["from kernelscope.compiler.runtime.cpp_build import load_library", "",
                 f"_lib = load_library({str(artifact)!r})"]
        lines += [f"{k.name} = cpp_kernel(_lib, {k.name!r}, {len(k.args)})" for k in kernels]
        return lines

    def build_source(self, kernels: list[GeneratedKernel]) -> str:
        body = library_kernels(kernels)  # a repeated kernel body is compiled once
        aten = ATEN_INCLUDE if needs_aten_math(body) else ""
        # The flags are part of what is cached (a library built without -g has no lines).
        return PRELUDE + aten + CPP_MATH_HELPERS + "\n" + body + f"\n// {' '.join(FLAGS)}\n"

    def artifact_path(self, source_path: Path) -> Path | None:
        return source_path.with_suffix(".so")

    def build(self, source_path: Path | None) -> BuildResult:
        assert source_path is not None
        lib = source_path.with_suffix(".so")
        if lib.exists():
            return BuildResult(lib, True, 0.0)
        start = time.perf_counter()
        tmp = lib.with_suffix(f".so.tmp{os.getpid()}-{threading.get_ident()}")
        proc = subprocess.run([CXX, *FLAGS, str(source_path), "-o", str(tmp)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"g++ failed to build {source_path.name}",
                             _kernel_at_error(source_path.read_text(), proc.stderr),
                             proc.stderr[-4000:])
        os.replace(tmp, lib)
        return BuildResult(lib, False, (time.perf_counter() - start) * 1000)

    def kernel_report(self, module: Any, kernel: str) -> dict[str, Any]:
        """The kernel's machine code as g++ built it (compiler/codegen/cpp/asm.py)."""
        lib = getattr(getattr(module, "_lib", None), "_name", None)
        return asm_report(lib, kernel) if isinstance(lib, str) else {}


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
