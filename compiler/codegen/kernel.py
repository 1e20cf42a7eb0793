"""The part of kernel generation that Triton and C++ share.

A kernel is an ops handler: each node's inner_fn runs under it and its ops calls come
back as generated lines (CSE'd per block). A load reads memory, a reduction's register,
or recomputes an in-kernel pointwise buffer at the index asked (CSE makes that free).
Reduction kernels run in segments (codegen/reduction.py); this module writes the blocks.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kernelscope.compiler.codegen.common import RINDEX, XINDEX, Lines, Scope, Var
from kernelscope.compiler.codegen.optable import OpTable
from kernelscope.compiler.codegen.reduction import ReductionWalks, segments
from kernelscope.compiler.codegen.walks import split_vars, storage_coords
from kernelscope.compiler.ir.index_print import sympy_str
from kernelscope.compiler.ir.indexing import (
    FloorDiv,
    ModularIndexing,
    decompose,
    simplify_index,
    sym,
)
from kernelscope.compiler.ir.nodes import ComputedBuffer, Pointwise, Reduction
from kernelscope.compiler.ir.ops import Handler, result_dtype, use_handler
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.nodes import SchedNode
from kernelscope.compiler.schedule.plan import KernelPlan


@dataclass
class Block:
    """Where the code of a run of nodes goes. A straight block runs once per output; a
    loop block is one pass over the reduction (`pre` before it, `index` atop each
    iteration, `post` after it); a persistent block has `index` but no `pre`/`post`."""

    body: Lines
    scope: Scope  # CSE; its `lines` are `body` except inside a masked sub-block
    index: Lines | None = None  # where index variables over rindex go
    index_names: dict[str, str] = field(default_factory=dict)  # printed term -> variable
    pre: Lines | None = None
    post: Lines | None = None
    nodes: list[SchedNode] = field(default_factory=list)
    row_stores: set[str] = field(default_factory=set)  # stored per element, inside the loop


class KernelCodegen(Handler):
    """The kernel skeleton: segments, loops, loads, stores, masks and the line-to-origin
    map, for every backend. Backends give the op table, a literal printer and the hooks
    below (how a load, a store, an accumulator and a loop are spelled)."""

    comment = "#"  # how the backend starts a comment line

    def __init__(self, plan: KernelPlan, index_checks: bool = False) -> None:
        self.plan = plan
        self.index_checks = index_checks  # bounds-check indirect indices (debug option)
        self.args = plan.arg_names()
        self.prologue = Lines()  # index variables that depend on xindex only
        self.index_names: dict[str, str] = {}  # printed x-domain term -> variable
        self.kernel_scope = Scope(Lines())
        self.block = self.straight_block(Lines())
        self.blocks: list[Block] = []  # every block generated, in order
        self.reductions: dict[str, Var] = {}
        self.node: SchedNode | None = None
        self.counter = 0
        self.icounter = {"x": 0, "r": 0}
        self.bounds = {XINDEX: max(plan.xnumel - 1, 0), RINDEX: max(plan.rnumel - 1, 0)}
        # The domain of every symbol an index may contain: rindex, the index variables
        # named here, and loaded values used as indices (indirect indexing).
        self.symbol_domains: dict[sympy.Symbol, str] = {XINDEX: "x", RINDEX: "r"}
        self.loaded: set[sympy.Symbol] = set()  # the symbols that are loaded values
        self._walks: dict[str, list[Any]] | None = None  # reduction_walks(), made once

    # -- backend hooks ------------------------------------------------------------------
    table: OpTable  # how this backend spells each op, per operand dtype

    @staticmethod
    def literal(value: Any, dtype: torch.dtype) -> str:
        raise NotImplementedError

    def type_name(self, dtype: torch.dtype) -> str:
        """The backend's name for the type values of `dtype` are computed in."""
        raise NotImplementedError

    def finish_op(self, name: str, text: str, dtype: torch.dtype) -> str:
        """A last say over an op's rendered text (C++ wraps narrow integer results)."""
        return text

    def fmt_cast(self, x: Var, dtype: torch.dtype) -> str:
        raise NotImplementedError

    def fmt_index(self, expr: sympy.Expr) -> str:
        raise NotImplementedError

    def fmt_index_value(self, expr: sympy.Expr, dtype: torch.dtype) -> str:
        raise NotImplementedError

    def load_expr(self, name: str, index: sympy.Expr, dtype: torch.dtype, domain: str) -> str:
        raise NotImplementedError

    def store_line(self, name: str, index: sympy.Expr, value: Var, domain: str) -> str:
        raise NotImplementedError

    def reduce(self, node: SchedNode, value: Var) -> Var:
        raise NotImplementedError

    def index_check(self, x: Var, size: int) -> str:
        """A line that stops the kernel when `x` is outside [0, size) (debug_index_asserts)."""
        raise NotImplementedError

    def write_loop(self, out: Lines, block: Block) -> None:
        """Write a loop block's loop over the reduction (its index lines and body)."""
        raise NotImplementedError

    def assemble(self, header: list[str], body: Lines) -> Lines:
        """The whole kernel around its body: signature, header comments, setup."""
        raise NotImplementedError

    def pointwise_vars(self, ranges: list[int]) -> list[Any]:
        return decompose(XINDEX, ranges)

    def output_vars(self, ranges: list[int]) -> list[Any]:
        """A reduction kernel's coordinates of one output (every node over the outputs
        must agree: a reduction's result is its register)."""
        return decompose(XINDEX, ranges)

    # -- emission -----------------------------------------------------------------------
    def new_var(self, prefix: str = "tmp") -> str:
        name = f"{prefix}{self.counter}"
        self.counter += 1
        return name

    def emit(self, expr: str, dtype: torch.dtype, domain: str) -> Var:
        key = f"{expr}::{dtype}"
        hit = self.block.scope.get(key)
        if hit is not None:
            return hit
        var = Var(self.new_var(), dtype, domain)
        self.block.scope.cache[key] = var
        self.write_assign(var, expr)
        return var

    def write_assign(self, var: Var, expr: str) -> None:
        self.block.scope.lines.write(f"{var.name} = {expr}", self.origins(),
                                     self.buffer_names())

    def origins(self) -> tuple[str, ...]:
        return (self.origin,) if self.origin else ()

    def buffer_names(self) -> tuple[str, ...]:
        return (self.node.name,) if self.node is not None else ()

    def write_for(self, lines: Lines, node: SchedNode, text: str) -> None:
        """A line that belongs to `node` (its origins when no op is being generated)."""
        lines.write(text, self.origins() or tuple(sorted(node.buffer.origins)), (node.name,))

    def write_header(self, out: Lines, header: list[str]) -> None:
        for h in header:
            out.write(f"{self.comment} {h}")

    @contextlib.contextmanager
    def sub_scope(self) -> Iterator[Lines]:
        """Lines (with their own CSE scope) nested inside the current block's."""
        outer = self.block.scope
        lines = Lines()
        self.block.scope = Scope(lines, outer)
        try:
            yield lines
        finally:
            self.block.scope = outer

    def index_var(self, term: sympy.Expr) -> sympy.Expr:
        """Name an index subterm (`xindex % 64`) once, in the block its domain needs. A
        term over loaded values (an indirect index) stays inline: the lines that name
        terms (the prologue, the top of each iteration) run before any load."""
        if term.free_symbols & self.loaded:
            return term
        domain = "r" if RINDEX in term.free_symbols else "x"
        table, target = self.index_names, self.prologue
        if domain == "r":
            table, target = self.block.index_names, self.block.index  # type: ignore[assignment]
            assert target is not None, "an rindex term outside a reduction block"
        text = self.fmt_index(term)
        if text not in table:
            name = f"{domain}{self.icounter[domain]}"  # x0, x1, ... and r0, r1, ...
            self.icounter[domain] += 1
            table[text] = name
            self.symbol_domains[sym(name)] = domain
            self.write_index_var(target, name, text)
        return sym(table[text])

    def write_index_var(self, lines: Lines, name: str, text: str) -> None:
        lines.write(f"{name} = {text}")

    def name_subterms(self, expr: sympy.Expr) -> sympy.Expr:
        expr = simplify_index(expr, self.bounds)
        terms = sorted(expr.atoms(FloorDiv, ModularIndexing), key=sympy_str)
        return expr.xreplace({t: self.index_var(t) for t in terms})

    def domain_of(self, expr: sympy.Expr) -> str:
        """"r" when the expression varies along the reduction, else "x"."""
        return "r" if any(self.symbol_domains.get(s) == "r" for s in expr.free_symbols) \
            else "x"

    # -- ops ----------------------------------------------------------------------------
    def load(self, name: str, index: Any) -> Var:
        if name in self.reductions:
            return self.reductions[name]
        written = self.plan.written
        if name in written and isinstance(written[name].data, Reduction):
            raise RuntimeError(f"{name} read before its reduction ran")
        if name in written:
            return self.recompute(written[name], simplify_index(index, self.bounds))
        return self.load_external(name, simplify_index(index, self.bounds))

    def load_external(self, name: str, index: sympy.Expr) -> Var:
        index = self.name_subterms(index)
        domain = self.domain_of(index)
        dtype = self.plan.buffers[name].dtype
        return self.emit(self.load_expr(name, index, dtype, domain), dtype, domain)

    def store(self, name: str, index: sympy.Expr, value: Var) -> None:
        index = self.name_subterms(index)
        domain = "r" if value.domain == "r" or self.domain_of(index) == "r" else "x"
        block = self.block
        # A per-row value stored at a per-row index from a loop block is stored once, after
        # the loop (one stored at an index over rindex, an expand's, is stored in it).
        lines = block.post if block.post is not None and domain == "x" else block.scope.lines
        if lines is not block.post:
            block.row_stores.add(name)
        lines.write(self.store_line(name, index, value, domain),
                    self.origins() or tuple(sorted(self.plan.written[name].origins)), (name,))

    def recompute(self, buf: ComputedBuffer, flat: sympy.Expr) -> Var:
        assert isinstance(buf.data, Pointwise)  # load() refuses reductions
        return buf.data.inner_fn(storage_coords(buf, flat))

    def constant(self, value: Any, dtype: torch.dtype) -> Var:
        """Constants are inlined as literals, never assigned to a variable."""
        value = cast_value(value, dtype)
        return Var(self.literal(value, dtype), dtype, "x", value)

    def index_expr(self, expr: Any, dtype: torch.dtype) -> Var:
        expr = self.name_subterms(sympy.sympify(expr))
        return self.emit(self.fmt_index_value(expr, dtype), dtype, self.domain_of(expr))

    def to_dtype(self, x: Var, dtype: torch.dtype) -> Var:
        if x.dtype == dtype:
            return x
        return self.emit(self.fmt_cast(x, dtype), dtype, x.domain)

    def op(self, name: str, args: Sequence[Var], dtype: torch.dtype,
           operands: Sequence[Var] | None = None) -> Var:
        """Emit op `name` over `args` with result dtype `dtype`; the table's rule is chosen
        by the dtypes of `operands` (all args unless given)."""
        text = self.table.render(name, [a.name for a in args],
                                 [a.dtype for a in (operands or args)], self.type_name(dtype))
        return self.emit(self.finish_op(name, text, dtype), dtype, var_domain(*args))

    def where(self, cond: Var, a: Var, b: Var) -> Var:
        return self.op("where", [cond, a, b], result_dtype("where", a.dtype, b.dtype), [a, b])

    def indirect_indexing(self, x: Var, size: int) -> sympy.Symbol:
        if self.index_checks:
            self.block.scope.lines.write(self.index_check(x, size), self.origins(),
                                         self.buffer_names())
        s = sym(x.name)
        self.symbol_domains[s] = x.domain
        self.loaded.add(s)
        return s

    def _unary(self, name: str, x: Var) -> Var:
        return self.op(name, [x], result_dtype(name, x.dtype))

    def _binary(self, name: str, a: Var, b: Var) -> Var:
        return self.op(name, [a, b], result_dtype(name, a.dtype, b.dtype))

    # -- nodes --------------------------------------------------------------------------
    def node_vars(self, node: SchedNode) -> tuple[list[Any], list[Any]]:
        """The node's loop variables as expressions of xindex and rindex."""
        data = node.buffer.data  # type: ignore[attr-defined]
        if isinstance(data, Reduction):
            return (self.output_vars(list(data.ranges)),
                    decompose(RINDEX, list(data.reduction_ranges)))
        ranges = list(data.ranges)
        if not self.plan.kind.reduces:
            return self.pointwise_vars(ranges), []
        if node.numel == self.plan.xnumel:
            return self.output_vars(ranges), []
        if self._walks is None:
            self._walks = ReductionWalks(self.plan, self.bounds, self.output_vars).walks()
        if node.name in self._walks:
            return self._walks[node.name], []
        return split_vars(ranges, self.plan.xnumel, XINDEX, RINDEX, self.plan.rnumel), []

    def codegen_node(self, node: SchedNode) -> None:
        self.node = node
        buf = node.buffer
        assert isinstance(buf, ComputedBuffer) and buf.data is not None
        xs, rs = self.node_vars(node)
        with use_handler(self):
            if isinstance(buf.data, Reduction):
                value = self._as_var(buf.data.inner_fn(xs, rs), buf.data.src_dtype)
                # The same reduction of the same value (mean and var both sum x): once.
                key = f"reduction:{buf.data.reduction_type}:{value.name}:{buf.dtype}"
                result = self.block.scope.get(key) or self.reduce(node, value)
                self.block.scope.cache[key] = result
                self.reductions[node.name] = result
            else:
                result = self._as_var(buf.data.inner_fn(xs), buf.dtype)
            if node.name in self.plan.stores:
                self.store(node.name, simplify_index(buf.layout.index(xs), self.bounds), result)
        self.node = None

    def _as_var(self, value: Any, dtype: torch.dtype) -> Var:
        if isinstance(value, Var):
            return value
        return self.constant(value, dtype)

    # -- blocks and segments ------------------------------------------------------------
    def straight_block(self, lines: Lines) -> Block:
        return Block(lines, Scope(lines, self.kernel_scope))

    def loop_block(self) -> Block:
        body = Lines()
        return Block(body, Scope(body, self.kernel_scope), index=Lines(), pre=Lines(),
                     post=Lines())

    def run(self, block: Block, nodes: list[SchedNode]) -> Block:
        """Generate `nodes` into `block`."""
        self.block = block
        self.blocks.append(block)
        block.nodes = list(nodes)
        for node in nodes:
            self.codegen_node(node)
        return block

    def generate(self, header: list[str]) -> Lines:
        bodies = {KernelKind.POINTWISE: self.pointwise_body,
                  KernelKind.REDUCTION: self.reduction_body}
        return self.assemble(header, bodies[self.plan.kind]())

    def pointwise_body(self) -> Lines:
        return self.run(self.straight_block(Lines()), self.plan.nodes).body

    def reduction_body(self) -> Lines:
        """Segments in order, each loop as pre, loop, post. All are generated before any is
        written out: a later loop may add lines to an earlier one (C++'s kept values)."""
        blocks = [self.run(self.straight_block(Lines()) if kind == "x" else self.loop_block(),
                           nodes) for kind, nodes in segments(self.plan)]
        out = Lines()
        for block in blocks:
            if block.pre is None or block.post is None:
                out.extend(block.body)
                continue
            out.extend(block.pre)
            self.write_loop(out, block)
            out.extend(block.post)
        return out



def cast_value(value: Any, dtype: torch.dtype) -> bool | int | float:
    """A Python constant as a value of `dtype` (what a literal of that type holds)."""
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    if isinstance(value, int):  # exact: through a float, 2**63 - 1 would become 2**63
        return int(value)
    v = float(value)
    return int(v) if math.isfinite(v) else 0


def var_domain(*vs: Var) -> str:
    return "r" if any(v.domain == "r" for v in vs) else "x"


def part_header(part: KernelPlan, i: int) -> list[str]:
    """The header comment of part `i` of a combo kernel (schedule/horizontal.py)."""
    return [f"part {i}: {part.name}: pointwise, {part.xnumel} elements",
            f"buffers: {', '.join(n.name for n in part.nodes)}"]
