"""Triton kernels: pointwise (1-D blocks), persistent and looped reductions.

The generated code follows the shape of the Triton tutorials: `pid`, offsets, a mask,
`*_ptr` arguments, BLOCK sizes as `tl.constexpr`. Index arithmetic is 32-bit (every size
we compile fits), loads and stores are masked, and every line knows its FX origins.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from compiler.codegen.common import XINDEX, Lines, Scope, Var, next_power_of_2
from compiler.codegen.kernel import KernelCodegen
from compiler.codegen.tiling import YINDEX, Tile, choose_tile, fits_grid, tile_config
from compiler.ir.indexing import pexpr
from compiler.ir.ops import reduction_identity as identity
from compiler.schedule.nodes import SchedNode
from compiler.schedule.plan import KernelPlan

TL_DTYPE = {
    torch.float32: "tl.float32", torch.float64: "tl.float64", torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16", torch.int64: "tl.int64", torch.int32: "tl.int32",
    torch.int16: "tl.int16", torch.int8: "tl.int8", torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}

FORMATS = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "truediv": "{0} / {1}",
    "floordiv": "{0} // {1}", "mod": "{0} % {1}", "fmod": "libdevice.fmod({0}, {1})",
    "pow": "libdevice.pow({0}, {1})", "maximum": "tl.maximum({0}, {1})",
    "minimum": "tl.minimum({0}, {1})", "atan2": "libdevice.atan2({0}, {1})",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}",
    "gt": "{0} > {1}", "ge": "{0} >= {1}",
    "logical_and": "{0} & {1}", "logical_or": "{0} | {1}", "logical_xor": "{0} ^ {1}",
    "bitwise_and": "{0} & {1}", "bitwise_or": "{0} | {1}", "bitwise_xor": "{0} ^ {1}",
    "logical_not": "{0} == 0", "bitwise_not": "~{0}",
    "neg": "-{0}", "abs": "tl.abs({0})", "exp": "tl.exp({0})", "exp2": "tl.exp2({0})",
    "expm1": "libdevice.expm1({0})", "log": "tl.log({0})", "log1p": "libdevice.log1p({0})",
    "log2": "tl.log2({0})", "sqrt": "tl.sqrt({0})", "rsqrt": "tl.rsqrt({0})",
    "sin": "tl.sin({0})", "cos": "tl.cos({0})", "tan": "libdevice.tan({0})",
    "tanh": "libdevice.tanh({0})", "sigmoid": "tl.sigmoid({0})", "erf": "tl.erf({0})",
    "floor": "tl.floor({0})", "ceil": "tl.ceil({0})", "trunc": "libdevice.trunc({0})",
    "round": "libdevice.nearbyint({0})", "reciprocal": "1.0 / {0}",
    "sign": "(({0} > 0).to({0}.dtype) - ({0} < 0).to({0}.dtype))",
    "isnan": "{0} != {0}", "isinf": "tl.abs({0}) == float('inf')",
    "relu": "tl.maximum({0}, 0)", "asin": "libdevice.asin({0})",
    "acos": "libdevice.acos({0})", "atan": "libdevice.atan({0})",
    "sinh": "libdevice.sinh({0})", "cosh": "libdevice.cosh({0})",
    "where": "tl.where({0}, {1}, {2})",
}

# Under TRITON_INTERPRET=1 libdevice is not available: the same math from tl primitives.
INTERPRET_FORMATS = {
    "tanh": "(2.0 * tl.sigmoid(2.0 * {0}) - 1.0)", "pow": "tl.exp({1} * tl.log({0}))",
    "expm1": "(tl.exp({0}) - 1.0)", "log1p": "tl.log(1.0 + {0})",
    "tan": "(tl.sin({0}) / tl.cos({0}))",
    "trunc": "tl.where({0} >= 0, tl.floor({0}), tl.ceil({0}))",
    "fmod": "({0} - {1} * tl.where({0} / {1} >= 0, tl.floor({0} / {1}), tl.ceil({0} / {1})))",
    "round": "tl.floor({0} + 0.5)",
    "sinh": "(0.5 * (tl.exp({0}) - tl.exp(-{0})))", "cosh": "(0.5 * (tl.exp({0}) + tl.exp(-{0})))",
}

REDUCE = {"sum": "tl.sum({0}, 1)", "max": "tl.max({0}, 1)", "min": "tl.min({0}, 1)",
          "prod": "tl.reduce({0}, 1, _prod)", "any": "(tl.max({0}.to(tl.int8), 1) != 0)",
          "all": "(tl.min({0}.to(tl.int8), 1) != 0)"}
COMBINE = {"sum": "{0} + {1}", "max": "tl.maximum({0}, {1})", "min": "tl.minimum({0}, {1})",
           "prod": "{0} * {1}", "any": "{0} | {1}", "all": "{0} & {1}"}


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

    def __init__(self, plan: KernelPlan, persistent: bool, rblock: int,
                 interpret: bool = False) -> None:
        super().__init__(plan, persistent)
        self.rblock = rblock
        self.formats = {**FORMATS, **INTERPRET_FORMATS} if interpret else FORMATS

    def fmt_cast(self, x: Var, dtype: torch.dtype) -> str:
        return f"{x.name}.to({TL_DTYPE[dtype]})"

    def to_dtype(self, x: Var, dtype: torch.dtype) -> Var:
        if x.dtype == dtype:
            return x
        if _is_literal(x):
            return Var(_cast_literal(x.name, dtype), dtype, "x")
        return self.emit(self.fmt_cast(x, dtype), dtype, x.domain)

    def fmt_index(self, expr: sympy.Expr) -> str:
        return pexpr(expr)

    def fmt_index_value(self, expr: sympy.Expr, dtype: torch.dtype) -> str:
        text = pexpr(expr)
        if not expr.free_symbols:
            return literal(int(expr), dtype)
        return f"({text}).to({TL_DTYPE[dtype]})"

    def _mask(self, domain: str) -> str:
        parts = (["ymask"] if self.tile is not None else []) + ["xmask"]
        parts += ["rmask"] if domain == "r" else []
        parts += [m.name for m in self.masks]
        return " & ".join(parts)

    def _index_domain(self, index: sympy.Expr) -> str:
        names = {str(s) for s in index.free_symbols}
        if any(n.startswith("r") for n in names):
            return "r"
        for n in names:
            v = self._vars.get(n)
            if v is not None and v.domain == "r":
                return "r"
        return "x"

    @property
    def _vars(self) -> dict[str, Var]:
        out: dict[str, Var] = {}
        scope: Scope | None = self.scope
        while scope is not None:
            for v in scope.cache.values():
                out[v.name] = v
            scope = scope.parent
        return out

    def load_external(self, name: str, index: sympy.Expr) -> Var:
        index = self.name_subterms(index)
        buf = self.plan.buffers[name]
        domain = self._index_domain(index)
        if not index.free_symbols and not self.masks:
            expr = f"tl.load({self.args[name]} + ({pexpr(index)}))"
        else:
            expr = f"tl.load({self.args[name]} + ({pexpr(index)}), {self._mask(domain)}, other=0)"
        if buf.dtype == torch.bool:
            expr += ".to(tl.int1)"
        return self.emit(expr, buf.dtype, domain)

    def store(self, name: str, index: sympy.Expr, value: Var) -> None:
        index = self.name_subterms(index)
        domain = "r" if value.domain == "r" or self._index_domain(index) == "r" else "x"
        shape = self._shape(domain)
        v = value.name
        if _is_literal(value):
            v = f"tl.full({shape}, {value.name}, {TL_DTYPE[value.dtype]})"
        lines = self.post if (self.post is not None and value.domain == "x"
                              and self.plan.kind == "reduction") else self.scope.lines
        lines.write(f"tl.store({self.args[name]} + ({pexpr(index)}), {v}, {self._mask(domain)})",
                    self.origins() or tuple(sorted(self.plan.written[name].origins)), (name,))

    def _shape(self, domain: str) -> str:
        if self.tile is not None:
            return "[YBLOCK, XBLOCK]"
        if self.plan.kind == "pointwise":
            return "[XBLOCK]"
        return "[XBLOCK, RBLOCK]" if domain == "r" else "[XBLOCK, 1]"

    def masked_body(self, mask: Var, body: Callable[[], Any], other: Any) -> Var:
        self.masks.append(mask)
        try:
            value = body()
        finally:
            self.masks.pop()
        if not isinstance(value, Var):
            value = self.constant(value, torch.float32)
        if _is_literal(value):
            return value
        return self.emit(f"tl.where({mask.name}, {value.name}, {literal(other, value.dtype)})",
                         value.dtype, _dom(mask, value))

    def reduce(self, node: SchedNode, value: Var) -> Var:
        data = node.buffer.data  # type: ignore[attr-defined]
        rtype, src = data.reduction_type, value.dtype
        ident = literal(identity(rtype, src), src)
        origins = self.origins() or tuple(sorted(node.buffer.origins))
        if _is_literal(value) or value.domain == "x":
            value = self.emit(f"tl.full([XBLOCK, RBLOCK], {value.name}, {TL_DTYPE[src]})"
                              if _is_literal(value) else
                              f"tl.broadcast_to({value.name}, [XBLOCK, RBLOCK])", src, "r")
        out_dtype = TL_DTYPE[node.buffer.dtype]
        if self.persistent:
            lines = self.scope.lines
            masked = self.emit(f"tl.where(xmask & rmask, {value.name}, {ident})", src, "r")
            result = Var(self.new_var(), node.buffer.dtype, "x")
            lines.write(f"{result.name} = {self._finish(rtype, masked.name, '_' + result.name)}"
                        f".to({out_dtype})", origins, (node.name,))
            return result
        assert self.pre is not None and self.post is not None
        result = Var(self.new_var(), node.buffer.dtype, "x")
        acc = f"_{result.name}"
        self.pre.write(f"{acc} = tl.full([XBLOCK, RBLOCK], {ident}, {TL_DTYPE[src]})",
                       origins, (node.name,))
        if rtype in ("argmax", "argmin"):
            cmp = ">" if rtype == "argmax" else "<"
            self.pre.write(f"{acc}_idx = tl.full([XBLOCK, RBLOCK], 2147483647, tl.int32)",
                           origins, (node.name,))
            take = self.emit(f"xmask & rmask & ({value.name} {cmp} {acc})", torch.bool, "r")
            self.scope.lines.write(f"{acc}_idx = tl.where({take.name}, rindex, {acc}_idx)",
                                   origins, (node.name,))
            self.scope.lines.write(f"{acc} = tl.where({take.name}, {value.name}, {acc})",
                                   origins, (node.name,))
            best = "tl.max" if rtype == "argmax" else "tl.min"
            self.post.write(f"{acc}_best = {best}({acc}, 1)[:, None]", origins, (node.name,))
            self.post.write(f"{result.name} = tl.min(tl.where({acc} == {acc}_best, {acc}_idx, "
                            f"2147483647), 1)[:, None].to({out_dtype})", origins, (node.name,))
            return result
        combined = COMBINE[rtype].format(acc, value.name)
        self.scope.lines.write(f"{acc} = tl.where(xmask & rmask, {combined}, {acc})",
                               origins, (node.name,))
        self.post.write(f"{result.name} = {REDUCE[rtype].format(acc)}[:, None].to({out_dtype})",
                        origins, (node.name,))
        return result

    def _finish(self, rtype: str, masked: str, scratch: str) -> str:
        if rtype in ("argmax", "argmin"):
            best = "tl.max" if rtype == "argmax" else "tl.min"
            return (f"tl.min(tl.where({masked} == {best}({masked}, 1)[:, None], rindex, "
                    f"2147483647), 1)[:, None]")
        return REDUCE[rtype].format(masked) + "[:, None]"

    # -- assembling the kernel ----------------------------------------------------------
    def generate(self, header: list[str]) -> Lines:
        plan = self.plan
        if plan.kind == "pointwise":
            for node in plan.nodes:
                self.codegen_node(node)
            body = self.body
        else:
            body = self._reduction_body()
        out = Lines()
        out.write("@triton.jit")
        params = [self.args[b] for b in plan.inputs] + [self.args[b] for b in plan.stores]
        if self.tile is not None:
            params += ["ynumel", "xnumel", "YBLOCK: tl.constexpr", "XBLOCK: tl.constexpr"]
        elif plan.kind == "pointwise":
            params += ["xnumel", "XBLOCK: tl.constexpr"]
        else:
            params += ["xnumel", "rnumel", "XBLOCK: tl.constexpr", "RBLOCK: tl.constexpr"]
        out.write(f"def {plan.name}({', '.join(params)}):")
        with out.indent():
            for h in header:
                out.write(f"# {h}")
            if self.tile is not None:
                out.write("yoffset = tl.program_id(1) * YBLOCK")
                out.write("yindex = yoffset + tl.arange(0, YBLOCK)[:, None]")
                out.write("ymask = yindex < ynumel")
            out.write("xoffset = tl.program_id(0) * XBLOCK")
            if self.tile is not None:
                out.write("xindex = xoffset + tl.arange(0, XBLOCK)[None, :]")
            elif plan.kind == "pointwise":
                out.write("xindex = xoffset + tl.arange(0, XBLOCK)")
            else:
                out.write("xindex = xoffset + tl.arange(0, XBLOCK)[:, None]")
            out.write("xmask = xindex < xnumel")
            if plan.kind == "reduction":
                out.write("rbase = tl.arange(0, RBLOCK)[None, :]")
            out.extend(self.prologue)
            out.extend(body)
        return out

    def _reduction_body(self) -> Lines:
        body = Lines()
        if self.persistent:
            body.write("rindex = rbase")
            body.write("rmask = rindex < rnumel")
            self.r_index_lines = body
            main = Lines()
            self.body, self.scope = main, Scope(main)
            self.kernel_scope = self.scope
            for node in self.plan.nodes:
                self.codegen_node(node)
            body.extend(main)
            return body
        for kind, nodes in self.segments():
            loop = self.run_segment(kind, nodes, body)
            if loop is None:
                continue
            assert self.pre is not None and self.post is not None
            assert self.r_index_lines is not None
            body.extend(self.pre)
            body.write("for roffset in range(0, rnumel, RBLOCK):")
            with body.indent():
                body.write("rindex = roffset + rbase")
                body.write("rmask = rindex < rnumel")
                body.extend(self.r_index_lines)
                body.extend(loop)
            body.extend(self.post)
            self.pre = self.post = None
        return body


def _is_literal(v: Var) -> bool:
    return not v.name.startswith(("tmp", "_tmp", "x", "r", "in_", "out_"))


def _cast_literal(text: str, dtype: torch.dtype) -> str:
    try:
        value: Any = float(eval(text, {"float": float}))  # noqa: S307 - our own literal
    except Exception:
        return text
    if dtype.is_floating_point:
        return literal(value, dtype)
    if dtype == torch.bool:
        return literal(bool(value), dtype)
    return literal(int(value) if not math.isinf(value) else 0, dtype)


def _dom(*vs: Var) -> str:
    return "r" if any(v.domain == "r" for v in vs) else "x"


def block_config(plan: KernelPlan, persistent_limit: int) -> dict[str, Any]:
    """Block sizes and warps: simple rules that keep ~1-4K elements per program."""
    if plan.kind == "pointwise":
        xblock = min(1024, next_power_of_2(plan.xnumel))
        return {"persistent": True, "XBLOCK": xblock, "RBLOCK": 1,
                "num_warps": max(1, min(8, xblock // 128)),
                "grid": (-(-plan.xnumel // xblock),)}
    rnumel = plan.rnumel
    if rnumel <= persistent_limit:
        rblock = next_power_of_2(rnumel)
        xblock = max(1, min(next_power_of_2(plan.xnumel), max(1, 2048 // rblock)))
        persistent = True
    else:
        xblock = min(8, next_power_of_2(plan.xnumel))
        rblock = max(128, 2048 // xblock)
        persistent = False
    warps = max(1, min(8, (xblock * rblock) // 256))
    return {"persistent": persistent, "XBLOCK": xblock, "RBLOCK": rblock, "num_warps": warps,
            "grid": (-(-plan.xnumel // xblock),)}


def generate_triton(plan: KernelPlan, header: list[str], persistent_limit: int,
                    interpret: bool = False) -> TritonKernel:
    cfg = block_config(plan, persistent_limit)
    gen = TritonKernelCodegen(plan, cfg["persistent"], cfg["RBLOCK"], interpret)
    tile = choose_tile(plan)
    if tile is not None and fits_grid(tile, tile_config(tile)["YBLOCK"]):
        return _generate_tiled(gen, tile, header)
    lines = gen.generate(header)
    meta = {"XBLOCK": cfg["XBLOCK"]}
    numels = [plan.xnumel]
    if plan.kind == "reduction":
        meta["RBLOCK"] = cfg["RBLOCK"]
        numels.append(plan.rnumel)
    line_map = [{"line": i + 1, "origins": list(ln.origins), "buffers": list(ln.buffers)}
                for i, ln in enumerate(lines.lines) if ln.origins or ln.buffers]
    return TritonKernel(plan.name, lines.text(), line_map, cfg["grid"], meta,
                        cfg["num_warps"], plan.inputs + plan.stores, numels)


def _generate_tiled(gen: TritonKernelCodegen, tile: Tile, header: list[str]) -> TritonKernel:
    plan = gen.plan
    cfg = tile_config(tile)
    gen.tile = tile
    gen.bounds[YINDEX] = tile.y - 1
    gen.bounds[XINDEX] = tile.x - 1
    lines = gen.generate(header + [tile.reason])
    grid = (-(-tile.x // cfg["XBLOCK"]), -(-tile.y // cfg["YBLOCK"]))
    line_map = [{"line": i + 1, "origins": list(ln.origins), "buffers": list(ln.buffers)}
                for i, ln in enumerate(lines.lines) if ln.origins or ln.buffers]
    return TritonKernel(plan.name, lines.text(), line_map, grid,
                        {"YBLOCK": cfg["YBLOCK"], "XBLOCK": cfg["XBLOCK"]}, cfg["num_warps"],
                        plan.inputs + plan.stores, [tile.y, tile.x])
