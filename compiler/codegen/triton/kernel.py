"""Triton kernels: pointwise (1-D blocks), persistent and looped reductions.

The generated code follows the shape of the Triton tutorials: `pid`, offsets, a mask,
`*_ptr` arguments, BLOCK sizes as `tl.constexpr`. Index arithmetic is 32-bit (every size
we compile fits), loads and stores are masked, and every line knows its FX origins.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kernelscope.compiler.codegen.common import RINDEX, XINDEX, Lines, Scope, Var
from kernelscope.compiler.codegen.kernel import Block, KernelCodegen, var_domain
from kernelscope.compiler.codegen.mathops import (
    TRITON_INTERPRET_DROPS,
    TRITON_INTERPRET_MATH,
    TRITON_MATH,
)
from kernelscope.compiler.codegen.optable import (
    C_LIKE,
    OpTable,
    calls,
    finish_op,
    float_only,
    merged,
    numeric,
)
from kernelscope.compiler.codegen.tiling import (
    YINDEX,
    Order,
    Tile,
    choose_tile,
    column_walk,
    fits_grid,
    memory_order,
    tile_config,
)
from kernelscope.compiler.codegen.triton import rules
from kernelscope.compiler.codegen.walks import split_vars
from kernelscope.compiler.ir.index_print import pexpr
from kernelscope.compiler.ir.ops import combine_op, reduction_identity
from kernelscope.compiler.schedule.nodes import SchedNode
from kernelscope.compiler.schedule.plan import KernelPlan

TL_DTYPE = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32",
    torch.int16: "tl.int16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}

_FLOOR_DIV_INT = ("tl.where((({0} % {1}) != 0) & (({0} < 0) != ({1} < 0)), "
                  "{0} // {1} - 1, {0} // {1})")  # `//` truncates; torch floors
# Reductions are ops of the table too (optable.combine_op / finish_op), so the refusal
# check sees them. logsumexp's rule joins a row's max and its sum of exp(v - max); the
# running steps are `_logsumexp`'s (made only where the backend has ONLINE_SOFTMAX).
REDUCTIONS: dict[str, Any] = {
    **{finish_op(r): rule for r, rule in {
        "sum": "tl.sum({0}, 1)", "max": "tl.max({0}, 1)", "min": "tl.min({0}, 1)",
        "prod": "tl.reduce({0}, 1, _prod)", "any": "(tl.max({0}.to(tl.int8), 1) != 0)",
        "all": "(tl.min({0}.to(tl.int8), 1) != 0)"}.items()},
    **{combine_op(r): rule for r, rule in {
        "sum": "{0} + {1}", "max": "tl.maximum({0}, {1})", "min": "tl.minimum({0}, {1})",
        "prod": "{0} * {1}", "any": "{0} | {1}", "all": "{0} & {1}",
        "argmax": "{1} > {0}", "argmin": "{1} < {0}",
        "logsumexp": float_only("({0} + tl.log({1}))")}.items()},
}
OPS = OpTable("Triton", merged(merged(C_LIKE, {
    **REDUCTIONS,
    "truediv": float_only("{0} / {1}"),
    "floordiv": {"int": _FLOOR_DIV_INT, "uint": "{0} // {1}", "float": "tl.floor({0} / {1})"},
    # Integer `%` is C's remainder (the sign of the dividend): fmod's rule; mod takes the
    # sign of the divisor, as Python's and torch.remainder do.
    "mod": {"int": "((({0} % {1}) + {1}) % {1})", "uint": "{0} % {1}",
            "float": "({0} - {1} * tl.floor({0} / {1}))"},
    "fmod": {"float": "libdevice.fmod({0}, {1})"},
    # tl.maximum's default NaN rule is the target's (maxnum on a GPU: the number wins);
    # torch.maximum/minimum return the NaN.
    "maximum": {"float": "tl.maximum({0}, {1}, tl.PropagateNan.ALL)", "*": "tl.maximum({0}, {1})"},
    "minimum": {"float": "tl.minimum({0}, {1}, tl.PropagateNan.ALL)", "*": "tl.minimum({0}, {1})"},
    # Bools add as `or` and multiply as `and` in torch; tl.int1 arithmetic wraps (1 + 1 = 0).
    "add": {"bool": "(({0} != 0) | ({1} != 0))", "*": "{0} + {1}"},
    "mul": {"bool": "(({0} != 0) & ({1} != 0))", "*": "{0} * {1}"},
    "logical_and": "{0} & {1}", "logical_or": "{0} | {1}", "logical_xor": "{0} ^ {1}",
    "bitwise_and": {"bool": "{0} & {1}"}, "bitwise_or": {"bool": "{0} | {1}"},
    "bitwise_xor": {"bool": "{0} ^ {1}"}, "bitwise_not": {"bool": "{0} == 0"},
    "logical_not": "{0} == 0", "abs": "tl.abs({0})",
    **calls("tl.{}({{0}})", "exp exp2 log log2 sqrt rsqrt sin cos sigmoid erf"),
    **calls("libdevice.{}({{0}})", "expm1 log1p tan tanh asin acos atan sinh cosh"),
    **calls("libdevice.{}({{0}}, {{1}})", "atan2"),
    # Integers by squaring (_ipow and _upow are in the kernels' prelude).
    "pow": {"float": "libdevice.pow({0}, {1})", "int": "_ipow({0}, {1})",
            "uint": "_upow({0}, {1})"},
    # Rounding an integer is the integer.
    **{n: {"float": f, "*": "{0}"}
       for n, f in (("floor", "tl.floor({0})"), ("ceil", "tl.ceil({0})"),
                    ("trunc", "libdevice.trunc({0})"), ("round", "libdevice.nearbyint({0})"))},
    "reciprocal": float_only("1.0 / {0}"),
    "sign": numeric("(({0} > 0).to({0}.dtype) - ({0} < 0).to({0}.dtype))"),
    "isnan": "{0} != {0}", "isinf": "tl.abs({0}) == float('inf')",
    # NaN and -0.0 stay themselves, as in eager's relu (tl.maximum(x, 0) gave 0 for NaN).
    "relu": {**numeric("tl.maximum({0}, 0)"), "float": "tl.where({0} < 0, 0.0, {0})"},
    "where": "tl.where({0}, {1}, {2})",
}), TRITON_MATH))

# torch.round rounds half to even (libdevice.nearbyint on a GPU). From tl primitives: the
# fraction decides, a tie goes to the even neighbour (floor + floor mod 2); inf and nan,
# whose fraction is nan, stay themselves. `floor(x + 0.5)` rounded ties up, and
# 0.49999997 to 1.
_ROUND_HALF_EVEN = ("tl.where({0} - tl.floor({0}) != {0} - tl.floor({0}), {0}, "
                    "tl.where({0} - tl.floor({0}) > 0.5, tl.floor({0}) + 1.0, "
                    "tl.where({0} - tl.floor({0}) < 0.5, tl.floor({0}), "
                    "tl.floor({0}) + (tl.floor({0}) - 2.0 * tl.floor(tl.floor({0}) * 0.5)))))")

_BOOL_BINARY = (("and", "&"), ("or", "|"), ("xor", "^"))

# Under TRITON_INTERPRET=1 libdevice is not available: the same math from tl primitives.
INTERPRET_OPS = OPS.extend({
    "tanh": float_only("(2.0 * tl.sigmoid(2.0 * {0}) - 1.0)"),
    "pow": {"float": "tl.exp({1} * tl.log({0}))", "int": "_ipow({0}, {1})",
            "uint": "_upow({0}, {1})"},
    "expm1": float_only("(tl.exp({0}) - 1.0)"), "log1p": float_only("tl.log(1.0 + {0})"),
    "tan": float_only("(tl.sin({0}) / tl.cos({0}))"),
    "trunc": {"float": "tl.where({0} >= 0, tl.floor({0}), tl.ceil({0}))", "*": "{0}"},
    "fmod": {**C_LIKE["fmod"],  # type: ignore[dict-item]
             "float": "({0} - {1} * tl.where({0} / {1} >= 0, tl.floor({0} / {1}), "
                      "tl.ceil({0} / {1})))"},
    "round": {"float": _ROUND_HALF_EVEN, "*": "{0}"},
    "sinh": float_only("(0.5 * (tl.exp({0}) - tl.exp(-{0})))"),
    "cosh": float_only("(0.5 * (tl.exp({0}) + tl.exp(-{0})))"),
    # A comparison of a 0-d (scalar-loaded) value is a numpy bool scalar there, which `|`
    # with a block refuses ("ufunc 'bitwise_or' not supported"); `!= 0` makes both blocks.
    **{f"logical_{n}": f"(({{0}} != 0) {c} ({{1}} != 0))" for n, c in _BOOL_BINARY},
    **{f"bitwise_{n}": {**C_LIKE[f"bitwise_{n}"],  # type: ignore[dict-item]
                        "bool": f"(({{0}} != 0) {c} ({{1}} != 0))"} for n, c in _BOOL_BINARY},
    **TRITON_INTERPRET_MATH,
}).without(TRITON_INTERPRET_DROPS, "Triton interpreter")



@dataclass
class TritonKernel:
    name: str
    source: str
    line_map: list[dict[str, Any]]
    grid: tuple[int, ...]
    meta: dict[str, int] = field(default_factory=dict)
    num_warps: int = 4
    args: list[str] = field(default_factory=list)  # buffer names, in signature order
    numels: list[int] = field(default_factory=list)


def literal(value: Any, dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "1" if value else "0"
    if dtype.is_floating_point:
        v = float(value)
        if math.isinf(v):
            return "float('inf')" if v > 0 else "float('-inf')"
        if math.isnan(v):
            return "float('nan')"
        return repr(v)
    return str(int(value))


class TritonKernelCodegen(KernelCodegen):
    literal = staticmethod(literal)

    def __init__(self, plan: KernelPlan, persistent: bool, interpret: bool = False,
                 tile: Tile | None = None, index_checks: bool = False,
                 order: Order | None = None, full: tuple[bool, bool] = (False, False),
                 fused_casts: bool = False) -> None:
        super().__init__(plan, index_checks)
        self.full = full  # (x, r): the blocks tile xnumel / rnumel exactly (rules.full_blocks)
        # Option low_precision "fused": a float16/bfloat16 value read back as float32 in
        # the kernel that rounded it is the unrounded value, until it is stored.
        self.fused_casts = fused_casts
        self.unrounded: dict[str, Var] = {}
        self.stored: set[str] = set()  # values stored: read back rounded
        self.order = order  # a pointwise walk in a stored buffer's memory order
        self.persistent = persistent  # the whole row in registers: no loop over RBLOCK
        self.r_loads: list[sympy.Expr] = []  # indices (before naming) of loads along rindex
        self.r_read: set[tuple[str, sympy.Expr]] = set()
        self.table = INTERPRET_OPS if interpret else OPS
        self.tile = tile  # 2-D [YBLOCK, XBLOCK] tiles of a pointwise kernel
        self.masks: list[Var] = []  # the masks of the `masked` bodies being generated
        self.last_load: tuple[Var, str, sympy.Expr] | None = None  # (var, buffer, index)
        self.part = False  # a combo kernel's part: a helper that takes its program id
        if tile is not None:
            self.bounds[YINDEX] = tile.y - 1
            self.bounds[XINDEX] = tile.x - 1

    def fmt_cast(self, x: Var, dtype: torch.dtype) -> str:
        return self.cast_text(x.name, x.dtype, dtype)

    def cast_text(self, text: str, src: torch.dtype, dst: torch.dtype) -> str:
        """`text`, of dtype `src`, as `dst`. Under the interpreter a float -> bfloat16 cast
        truncates where a GPU and eager round to nearest even: _ks_bf16 rounds there."""
        if self.table is INTERPRET_OPS and dst == torch.bfloat16 and \
                src in (torch.float32, torch.float16):
            return f"_ks_bf16({text})" if src == torch.float32 else \
                f"_ks_bf16({text}.to(tl.float32))"
        return f"{text}.to({TL_DTYPE[dst]})"

    def type_name(self, dtype: torch.dtype) -> str:
        return TL_DTYPE[dtype]

    def to_dtype(self, x: Var, dtype: torch.dtype) -> Var:
        if x.dtype != dtype and x.value is not None:
            return self.constant(x.value, dtype)
        if dtype == torch.float32 and x.name in self.unrounded:
            return self.unrounded[x.name]
        out = super().to_dtype(x, dtype)
        if self.fused_casts and x.dtype == torch.float32 and out.name not in self.stored \
                and dtype in (torch.float16, torch.bfloat16):
            self.unrounded[out.name] = x
        return out

    def fmt_index(self, expr: sympy.Expr) -> str:
        return pexpr(expr)

    def fmt_index_value(self, expr: sympy.Expr, dtype: torch.dtype) -> str:
        text = pexpr(expr)
        if not expr.free_symbols:
            # A typed block, not a Python int: comparisons of it must give a block of
            # bools (the interpreter rejects a Python bool inside a load's mask).
            return f"tl.full([1], {literal(int(expr), dtype)}, {TL_DTYPE[dtype]})"
        return f"({text}).to({TL_DTYPE[dtype]})"

    def pointwise_vars(self, ranges: list[int]) -> list[Any]:
        if self.tile is not None:
            return split_vars(ranges, self.tile.y, YINDEX, XINDEX, self.tile.x)
        return self.output_vars(ranges)

    def output_vars(self, ranges: list[int]) -> list[Any]:
        walked = self.order.coords(ranges) if self.order is not None else None
        return walked if walked is not None else super().output_vars(ranges)

    def _mask(self, domain: str) -> str:
        parts = (["ymask"] if self.tile is not None else []) + ["xmask"]
        parts += ["rmask"] if domain == "r" else []
        parts += [m.name for m in self.masks]
        return " & ".join(parts)

    def load_external(self, name: str, index: sympy.Expr) -> Var:
        if RINDEX in index.free_symbols and (name, index) not in self.r_read:
            self.r_read.add((name, index))  # a load made again (CSE) counts once
            self.r_loads.append(index)
        var = super().load_external(name, index)
        self.last_load = (var, name, index)
        return var

    def where(self, cond: Var, a: Var, b: Var) -> Var:
        """where(c, load, b) right after that load: the load masked by c too, so lanes that
        take b fetch nothing; the unmasked load, if unused, is dropped (_drop_dead_loads)."""
        key = f"select:{cond.name}:{a.name}"
        seen = self.block.scope.get(key)
        if seen is not None:  # the same select again (a reader recomputing a producer)
            return super().where(cond, seen, b)
        last = self.last_load
        lines = self.block.scope.lines.lines
        if last is None or last[0] is not a or a.is_literal or cond.is_literal or \
                cond.dtype != torch.bool or (cond.domain == "r" and a.domain == "x") or \
                not lines or not lines[-1].text.lstrip().startswith(f"{a.name} = tl.load("):
            return super().where(cond, a, b)
        self.masks.append(cond)
        try:
            masked = KernelCodegen.load_external(self, last[1], last[2])
        finally:
            self.masks.pop()
        self.last_load = None
        self.block.scope.cache[key] = masked
        return super().where(cond, masked, b)

    def load_expr(self, name: str, index: sympy.Expr, dtype: torch.dtype, domain: str) -> str:
        if not index.free_symbols and not self.masks:
            expr = f"tl.load({self.args[name]} + ({pexpr(index)}))"
        else:
            expr = f"tl.load({self.args[name]} + ({self._offset(index, domain)}), " \
                f"{self._mask(domain)}, other=0)"
        return expr + ".to(tl.int1)" if dtype == torch.bool else expr

    def store_line(self, name: str, index: sympy.Expr, value: Var, domain: str) -> str:
        # A stored value is read back as stored, here as in the kernels that load it (a
        # forward's saved activation and its backward see the same bits).
        self.unrounded.pop(value.name, None)
        self.stored.add(value.name)
        v = value.name
        if value.is_literal:
            v = f"tl.full({self._shape(domain)}, {value.name}, {TL_DTYPE[value.dtype]})"
        return f"tl.store({self.args[name]} + ({self._offset(index, domain)}), {v}, " \
            f"{self._mask(domain)})"

    def _offset(self, index: sympy.Expr, domain: str) -> str:
        """A constant index, or one of loaded values only, is broadcast to a block of
        pointers: a scalar pointer with a block value does not compile."""
        if not index.free_symbols:
            return f"tl.full({self._shape(domain)}, {pexpr(index)}, tl.int32)"
        if index.free_symbols <= self.loaded:
            return f"({pexpr(index)}) + tl.zeros({self._shape(domain)}, tl.int32)"
        return pexpr(index)

    def op(self, name: str, args: Sequence[Var], dtype: torch.dtype,
           operands: Sequence[Var] | None = None) -> Var:
        if self.table is INTERPRET_OPS and name != "where" and \
                any(a.dtype == torch.bfloat16 for a in args):
            return self._in_float32(name, args, dtype)
        # Literals alone would be folded by Python, not in the dtype: `1.0 / 0.0` raises,
        # integers do not wrap. The first becomes a typed 0-d value; the op runs in Triton.
        if name != "where" and args and all(a.is_literal for a in args):
            first = args[0]
            typed = self.emit(f"tl.full([], {first.name}, {TL_DTYPE[first.dtype]})",
                              first.dtype, first.domain)
            return super().op(name, [typed, *args[1:]], dtype, operands or args)
        return super().op(name, args, dtype, operands)

    def _in_float32(self, name: str, args: Sequence[Var], dtype: torch.dtype) -> Var:
        """Under the interpreter a bfloat16 value is its bits as uint16 (numpy has no
        bfloat16), so the op runs on exact float32 values and a bfloat16 result is
        rounded back to nearest even, as on a GPU."""
        wide = [self.to_dtype(a, torch.float32) if a.dtype == torch.bfloat16 else a
                for a in args]
        if dtype != torch.bfloat16:
            return self.op(name, wide, dtype)
        return self.to_dtype(self.op(name, wide, torch.float32), dtype)

    def _shape(self, domain: str) -> str:
        if self.tile is not None:
            return "[YBLOCK, XBLOCK]"
        if not self.plan.kind.reduces:
            return "[XBLOCK]"
        return "[XBLOCK, RBLOCK]" if domain == "r" else "[XBLOCK, 1]"

    def index_check(self, x: Var, size: int) -> str:
        return (f"tl.device_assert(((0 <= {x.name}) & ({x.name} < {size})) | "
                f"~({self._mask(x.domain)}), \"index out of bounds: 0 <= {x.name} < {size}\")")

    def masked(self, mask: Var, body: Callable[[], Any], other: Any) -> Var:
        self.masks.append(mask)
        try:
            value = body()
        finally:
            self.masks.pop()
        value = self._as_var(value, torch.float32)
        if value.is_literal:
            return value
        return self.emit(f"tl.where({mask.name}, {value.name}, {literal(other, value.dtype)})",
                         value.dtype, var_domain(mask, value))

    def reduce(self, node: SchedNode, value: Var) -> Var:
        data = node.buffer.data  # type: ignore[attr-defined]
        if self.table is INTERPRET_OPS and value.dtype == torch.bfloat16:
            value = self.to_dtype(value, torch.float32)  # its bits as uint16: see _in_float32
        rtype, src = data.reduction_type, value.dtype
        ident = literal(reduction_identity(rtype, src), src)
        if value.is_literal or value.domain == "x":
            value = self.emit(f"tl.full([XBLOCK, RBLOCK], {value.name}, {TL_DTYPE[src]})"
                              if value.is_literal else
                              f"tl.broadcast_to({value.name}, [XBLOCK, RBLOCK])", src, "r")
        out_dtype = TL_DTYPE[node.buffer.dtype]
        block, lines = self.block, self.block.scope.lines
        if rtype == "logsumexp":
            return self._logsumexp(node, value, TL_DTYPE[src], out_dtype)
        if block.pre is None or block.post is None:  # persistent: the row is in registers
            masked = self.emit(f"tl.where(xmask & rmask, {value.name}, {ident})", src, "r")
            result = Var(self.new_var(), node.buffer.dtype, "x")
            finish = self._finish(rtype, masked.name, src)
            self.write_for(lines, node, f"{result.name} = "
                           f"{self.cast_text(finish, src, node.buffer.dtype)}")
            return result
        result = Var(self.new_var(), node.buffer.dtype, "x")
        acc = f"_{result.name}"
        self.write_for(block.pre, node, f"{acc} = tl.full([XBLOCK, RBLOCK], {ident}, "
                                        f"{TL_DTYPE[src]})")
        if rtype in ("argmax", "argmin"):
            self.write_for(block.pre, node,
                           f"{acc}_idx = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int32)")
            better = self.table.render(combine_op(rtype), [acc, value.name], [src], "")
            take = self.emit(f"xmask & rmask & ({better})", torch.bool, "r")
            self.write_for(lines, node, f"{acc}_idx = tl.where({take.name}, rindex, {acc}_idx)")
            self.write_for(lines, node, f"{acc} = tl.where({take.name}, {value.name}, {acc})")
            best = "tl.max" if rtype == "argmax" else "tl.min"
            self.write_for(block.post, node, f"{acc}_best = {best}({acc}, 1)[:, None]")
            self.write_for(block.post, node,
                           f"{result.name} = tl.min(tl.where({acc} == {acc}_best, {acc}_idx, "
                           f"2147483647), 1)[:, None].to({out_dtype})")
            return result
        combined = self.table.render(combine_op(rtype), [acc, value.name], [src], "")
        self.write_for(lines, node, f"{acc} = tl.where(xmask & rmask, {combined}, {acc})")
        finish = f"{self._finish_rule(rtype, acc, src)}[:, None]"
        self.write_for(block.post, node,
                       f"{result.name} = {self.cast_text(finish, src, node.buffer.dtype)}")
        return result

    def _logsumexp(self, node: SchedNode, value: Var, src: str, out_dtype: str) -> Var:
        """log(sum(exp(v))) in one pass: per lane a running max and a rescaled sum of
        exps (rules.LSE_STEPS), the lanes combined after the loop."""
        block, lines = self.block, self.block.scope.lines
        result = Var(self.new_var(), node.buffer.dtype, "x")
        acc, inf = f"_{result.name}", "float('-inf')"
        put = self.write_for

        def cast(text: str) -> str:
            return self.cast_text(text, value.dtype, node.buffer.dtype)

        join = self.table.render(combine_op("logsumexp"), [f"{acc}_m", f"{acc}_s"],
                                 [value.dtype], out_dtype)
        if block.pre is None or block.post is None:  # persistent: the row is in registers
            put(lines, node, f"{acc}_v = tl.where(xmask & rmask, {value.name}, {inf})")
            put(lines, node, f"{acc}_m = tl.max({acc}_v, 1)[:, None]")
            put(lines, node, f"{acc}_s = tl.sum(tl.where({acc}_v == {inf}, 0.0, "
                             f"tl.exp({acc}_v - {acc}_m)), 1)[:, None]")
            put(lines, node, f"{result.name} = {cast(join)}")
            return result
        step = rules.lse_step(self.plan.xnumel)  # one row per program
        start = inf if step["init"] == "-inf" else literal(torch.finfo(value.dtype).min,
                                                            value.dtype)
        put(block.pre, node, f"{acc} = tl.full([XBLOCK, RBLOCK], {start}, {src})")
        put(block.pre, node, f"{acc}_sum = tl.zeros([XBLOCK, RBLOCK], {src})")
        put(lines, node, f"{acc}_v = tl.where(xmask & rmask, {value.name}, {inf})")
        for line in step["lines"]:
            put(lines, node, line.format(a=acc))
        put(block.post, node, f"{acc}_m = tl.max({acc}, 1)[:, None]")
        put(block.post, node, f"{acc}_s = tl.sum(tl.where({acc} == {inf}, 0.0, "
                              f"{acc}_sum * tl.exp({acc} - {acc}_m)), 1)[:, None]")
        put(block.post, node, f"{result.name} = {cast(join)}")
        return result

    def _finish(self, rtype: str, masked: str, dtype: torch.dtype) -> str:
        if rtype in ("argmax", "argmin"):
            best = "tl.max" if rtype == "argmax" else "tl.min"
            return (f"tl.min(tl.where({masked} == {best}({masked}, 1)[:, None], rindex, "
                    f"2147483647), 1)[:, None]")
        return self._finish_rule(rtype, masked, dtype) + "[:, None]"

    def _finish_rule(self, rtype: str, block: str, dtype: torch.dtype) -> str:
        return self.table.render(finish_op(rtype), [block], [dtype], "")

    # -- assembling the kernel ----------------------------------------------------------
    def reduction_body(self) -> Lines:
        if not self.persistent:
            return super().reduction_body()
        main = Lines()
        block = Block(main, Scope(main, self.kernel_scope), index=Lines())
        self.run(block, self.plan.nodes)
        body = Lines()
        body.write("rindex = rbase")
        body.write(self._rmask())
        assert block.index is not None
        body.extend(block.index)
        body.extend(main)
        return body

    def _rmask(self) -> str:
        if self.full[1]:  # no block runs past rnumel
            return "rmask = tl.full([1, RBLOCK], 1, tl.int1)"
        return "rmask = rindex < rnumel"

    def write_loop(self, out: Lines, block: Block) -> None:
        assert block.index is not None
        out.write("for roffset in range(0, rnumel, RBLOCK):")
        with out.indent():
            out.write("rindex = roffset + rbase")
            out.write(self._rmask())
            out.extend(block.index)
            out.extend(block.body)

    def assemble(self, header: list[str], body: Lines) -> Lines:
        plan = self.plan
        out = Lines()
        # device_assert is compiled only in debug mode
        debug = self.index_checks and not self.part  # the combo kernel's decorator counts
        out.write("@triton.jit(debug=True)" if debug else "@triton.jit")
        params = [self.args[b] for b in plan.inputs] + [self.args[b] for b in plan.stores]
        if self.tile is not None:
            params += ["ynumel", "xnumel", "YBLOCK: tl.constexpr", "XBLOCK: tl.constexpr"]
        elif not plan.kind.reduces:
            params += ["xnumel", "XBLOCK: tl.constexpr"] + (["pid"] if self.part else [])
        else:
            params += ["xnumel", "rnumel", "XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        out.write(f"def {plan.name}({', '.join(params)}):")
        with out.indent():
            self.write_header(out, header)
            if self.tile is not None:
                out.write("yoffset = tl.program_id(1) * YBLOCK")
                out.write("yindex = yoffset + tl.arange(0, YBLOCK)[:, None]")
                out.write("ymask = yindex < ynumel")
            out.write("xoffset = pid * XBLOCK" if self.part else
                      "xoffset = tl.program_id(0) * XBLOCK")
            if self.tile is not None:
                out.write("xindex = xoffset + tl.arange(0, XBLOCK)[None, :]")
            elif not plan.kind.reduces:
                out.write("xindex = xoffset + tl.arange(0, XBLOCK)")
            else:
                out.write("xindex = xoffset + tl.arange(0, XBLOCK)[:, None]")
            if self.full[0] and self.tile is None:  # no program runs past xnumel
                shape = "[XBLOCK, 1]" if plan.kind.reduces else "[XBLOCK]"
                out.write(f"xmask = tl.full({shape}, 1, tl.int1)")
            else:
                out.write("xmask = xindex < xnumel")
            if plan.kind.reduces:
                out.write("rbase = tl.arange(0, RBLOCK)[None, :]")
            out.extend(self.prologue)
            out.extend(body)
        _drop_dead_loads(out)
        return out


# A load, or a conversion left unused by low_precision "fused" (TritonKernelCodegen.to_dtype)
_LOAD_DEF = re.compile(r"^\s*(tmp\d+) = (tl\.load\(|tmp\d+\.to\(tl\.\w+\)$|_ks_bf16\()")
_TMP = re.compile(r"\btmp\d+\b")


def _drop_dead_loads(out: Lines) -> None:
    """Drop loads and conversions whose value no line uses (a load replaced by its masked
    form in where)."""
    uses = Counter(name for ln in out.lines for name in _TMP.findall(ln.text))
    out.lines = [ln for ln in out.lines
                 if not ((m := _LOAD_DEF.match(ln.text)) and uses[m.group(1)] == 1)]



def generate_triton(plan: KernelPlan, header: list[str], persistent_limit: int,
                    interpret: bool = False, index_checks: bool = False, part: bool = False,
                    fused_casts: bool = False) -> TritonKernel:
    """The kernel of `plan`; with `part`, a pointwise plan as a combo kernel's part (a
    1-D helper that takes its program id: codegen/triton/combo.py); `fused_casts`: the
    option low_precision "fused" (TritonKernelCodegen.to_dtype)."""
    cfg = rules.block_config(plan, persistent_limit)
    tile = None if part else choose_tile(plan)
    if tile is not None and fits_grid(tile, tile_config(tile)["YBLOCK"]):
        tcfg = tile_config(tile)
        gen = TritonKernelCodegen(plan, True, interpret, tile, index_checks,
                                  fused_casts=fused_casts)
        lines = gen.generate(header + [tile.reason])
        grid = (-(-tile.x // tcfg["XBLOCK"]), -(-tile.y // tcfg["YBLOCK"]))
        return TritonKernel(plan.name, lines.text(), lines.line_map(), grid,
                            {"YBLOCK": tcfg["YBLOCK"], "XBLOCK": tcfg["XBLOCK"]},
                            tcfg["num_warps"], plan.inputs + plan.stores, [tile.y, tile.x])
    order = memory_order(plan)
    notes = header + ([order.reason] if order is not None else [])
    full = rules.full_blocks(plan, cfg)
    gen = TritonKernelCodegen(plan, cfg["persistent"], interpret, None, index_checks, order,
                              full, fused_casts)
    gen.part = part
    lines = gen.generate(notes)
    columns = column_walk(gen.r_loads, plan.xnumel, plan.rnumel) if plan.kind.reduces else None
    if columns is not None:
        cfg = rules.column_config(plan)
        gen = TritonKernelCodegen(plan, cfg["persistent"], interpret, None, index_checks, order,
                                  rules.full_blocks(plan, cfg), fused_casts)
        lines = gen.generate([*notes, f"{columns}: {cfg['XBLOCK']} x {cfg['RBLOCK']}"])
    meta = {"XBLOCK": cfg["XBLOCK"]}
    numels = [plan.xnumel]
    if plan.kind.reduces:
        meta["RBLOCK"] = cfg["RBLOCK"]
        numels.append(plan.rnumel)
    return TritonKernel(plan.name, lines.text(), lines.line_map(), cfg["grid"], meta,
                        cfg["num_warps"], plan.inputs + plan.stores, numels)
