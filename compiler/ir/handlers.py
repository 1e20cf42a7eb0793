"""Three readers of an inner_fn: text, JSON tree, and the buffers it reads.

Each is an ops handler (see ops.py). `describe(node)` runs a loop body under all three
and returns what the `lowering` event carries for it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from kernelscope.compiler.ir.index_print import pexpr
from kernelscope.compiler.ir.indexing import index_vars, sym
from kernelscope.compiler.ir.nodes import Pointwise, Reduction
from kernelscope.compiler.ir.ops import Handler, promote_types, result_dtype, use_handler


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class PrintHandler(Handler):
    """Prints an inner_fn as straight-line code, one op per line (CSE'd)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.cache: dict[str, str] = {}

    def _emit(self, expr: str) -> str:
        if expr in self.cache:
            return self.cache[expr]
        var = f"tmp{len(self.cache)}"
        self.cache[expr] = var
        note = f"  # {self.origin}" if self.origin else ""
        self.lines.append(f"{var} = {expr}{note}")
        return var

    def load(self, name: str, index: Any) -> str:
        return self._emit(f"load({name}, {pexpr(index)})")

    def constant(self, value: Any, dtype: torch.dtype) -> str:
        return self._emit(f"constant({value!r}, {dtype_name(dtype)})")

    def index_expr(self, expr: Any, dtype: torch.dtype) -> str:
        return self._emit(f"index_expr({pexpr(expr)}, {dtype_name(dtype)})")

    def to_dtype(self, x: str, dtype: torch.dtype) -> str:
        return self._emit(f"to_dtype({x}, {dtype_name(dtype)})")

    def where(self, cond: str, a: str, b: str) -> str:
        return self._emit(f"where({cond}, {a}, {b})")

    def masked(self, mask: str, body: Callable[[], Any], other: float) -> str:
        inner = body()
        return self._emit(f"masked({mask}, {inner}, {other!r})")

    def indirect_indexing(self, x: str, size: int) -> sympy.Symbol:
        return sym(f"{x}")

    def _unary(self, name: str, x: str) -> str:
        return self._emit(f"{name}({x})")

    def _binary(self, name: str, a: str, b: str) -> str:
        return self._emit(f"{name}({a}, {b})")


class TreeHandler(Handler):
    """Builds the expression tree as nested JSON-ready dicts."""

    def _node(self, op: str, args: list[Any], **extra: Any) -> dict[str, Any]:
        node: dict[str, Any] = {"op": op, "args": args, **extra}
        if self.origin:
            node["origin"] = self.origin
        return node

    def load(self, name: str, index: Any) -> dict[str, Any]:
        return self._node("load", [], buffer=name, index=pexpr(index))

    def constant(self, value: Any, dtype: torch.dtype) -> dict[str, Any]:
        return self._node("constant", [], value=_json_number(value), dtype=dtype_name(dtype))

    def index_expr(self, expr: Any, dtype: torch.dtype) -> dict[str, Any]:
        return self._node("index_expr", [], expr=pexpr(expr), dtype=dtype_name(dtype))

    def to_dtype(self, x: Any, dtype: torch.dtype) -> dict[str, Any]:
        return self._node("to_dtype", [x], dtype=dtype_name(dtype))

    def where(self, cond: Any, a: Any, b: Any) -> dict[str, Any]:
        return self._node("where", [cond, a, b])

    def masked(self, mask: Any, body: Callable[[], Any], other: float) -> dict[str, Any]:
        return self._node("masked", [mask, body()], other=_json_number(other))

    def indirect_indexing(self, x: Any, size: int) -> sympy.Symbol:
        self.indirect = getattr(self, "indirect", []) + [x]
        return sym(f"indirect{len(self.indirect) - 1}")

    def _unary(self, name: str, x: Any) -> dict[str, Any]:
        return self._node(name, [x])

    def _binary(self, name: str, a: Any, b: Any) -> dict[str, Any]:
        return self._node(name, [a, b])


def _json_number(v: Any) -> Any:
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    if isinstance(v, bool):
        return v
    return v if isinstance(v, (int, float)) else str(v)


@dataclass
class Read:
    buffer: str
    index: sympy.Expr


@dataclass
class DepsHandler(Handler):
    """Records every (buffer, index) an inner_fn loads; values are placeholders."""

    reads: list[Read] = field(default_factory=list)
    indirect: int = 0

    def load(self, name: str, index: Any) -> None:
        self.reads.append(Read(name, sympy.sympify(index)))

    def constant(self, value: Any, dtype: torch.dtype) -> None:
        return None

    def index_expr(self, expr: Any, dtype: torch.dtype) -> None:
        return None

    def to_dtype(self, x: Any, dtype: torch.dtype) -> None:
        return None

    def where(self, cond: Any, a: Any, b: Any) -> None:
        return None

    def masked(self, mask: Any, body: Callable[[], Any], other: float) -> None:
        body()

    def indirect_indexing(self, x: Any, size: int) -> sympy.Symbol:
        self.indirect += 1
        return sym(f"indirect{self.indirect - 1}")

    def _unary(self, name: str, x: Any) -> None:
        return None

    def _binary(self, name: str, a: Any, b: Any) -> None:
        return None


# A loop body's op uses and value under OpUseHandler, by (body, its arguments).
OpUseMemo = dict[tuple[Any, ...], tuple[tuple[tuple[str, torch.dtype], ...], Any]]


class OpUseHandler(Handler):
    """Records each op a body calls with its operands' promoted dtype (what a backend's op
    table is asked), following dtypes as kernel codegen does; values are dtypes.

    `memo` (owned by the caller, e.g. one per graph lowering) keeps what each inlined body
    used and returned for given arguments: a chain of lazy values is then read once, not
    once more per node added to it. What a body does depends only on the body, its
    arguments and `dtype_of` (fixed per buffer), so a memo hit is the body run again."""

    def __init__(self, dtype_of: Callable[[str], torch.dtype],
                 memo: OpUseMemo | None = None) -> None:
        self.dtype_of = dtype_of
        self.uses: dict[tuple[str, torch.dtype], None] = {}
        self.memo = memo

    def call_traced(self, body: Callable[..., Any], fn: Callable[..., Any],
                    args: tuple[Any, ...]) -> Any:
        if self.memo is None:
            return fn(*args)
        key = (body, *(tuple(a) if isinstance(a, list) else a for a in args))
        try:
            hit = self.memo.get(key)
        except TypeError:  # an argument that is not an index (unhashable): no memo
            return fn(*args)
        if hit is None:
            outer, self.uses = self.uses, {}
            try:
                value = fn(*args)
            finally:
                inner, self.uses = self.uses, outer
            hit = self.memo[key] = (tuple(inner), value)
        self.uses.update(dict.fromkeys(hit[0]))
        return hit[1]

    def _use(self, name: str, *dtypes: torch.dtype) -> None:
        out = dtypes[0]
        for d in dtypes[1:]:
            out = promote_types(out, d)
        self.uses[(name, out)] = None

    def load(self, name: str, index: Any) -> torch.dtype:
        return self.dtype_of(name)

    def constant(self, value: Any, dtype: torch.dtype) -> torch.dtype:
        return dtype

    def index_expr(self, expr: Any, dtype: torch.dtype) -> torch.dtype:
        return dtype

    def to_dtype(self, x: Any, dtype: torch.dtype) -> torch.dtype:
        return dtype

    def where(self, cond: Any, a: torch.dtype, b: torch.dtype) -> torch.dtype:
        self._use("where", a, b)
        return result_dtype("where", a, b)

    def masked(self, mask: Any, body: Callable[[], Any], other: float) -> torch.dtype:
        value = body()
        return value if isinstance(value, torch.dtype) else torch.float32

    def indirect_indexing(self, x: Any, size: int) -> sympy.Symbol:
        return sym(f"indirect{len(self.uses)}")

    def _unary(self, name: str, x: torch.dtype) -> torch.dtype:
        self._use(name, x)
        return result_dtype(name, x)

    def _binary(self, name: str, a: torch.dtype, b: torch.dtype) -> torch.dtype:
        self._use(name, a, b)
        return result_dtype(name, a, b)


def op_uses(node: Pointwise | Reduction, dtype_of: Callable[[str], torch.dtype],
            memo: OpUseMemo | None = None) -> list[tuple[str, torch.dtype]]:
    """(op, operand dtype) for every op of a loop body, each once, in order."""
    handler = OpUseHandler(dtype_of, memo)
    call_body(node, handler)
    return list(handler.uses)


def body_vars(node: Pointwise | Reduction) -> tuple[list[sympy.Symbol], list[sympy.Symbol]]:
    """The symbols `call_body` binds: one per output dim, one per reduction dim."""
    ridx = index_vars("r", len(node.reduction_ranges)) if isinstance(node, Reduction) else []
    return index_vars("i", len(node.ranges)), ridx


def call_body(node: Pointwise | Reduction, handler: Handler) -> tuple[list[sympy.Symbol], Any]:
    """Run a loop body on symbolic loop variables under `handler`."""
    idx, ridx = body_vars(node)
    with use_handler(handler):
        if isinstance(node, Reduction):
            return idx + ridx, node.inner_fn(idx, ridx)
        return idx, node.inner_fn(idx)


def reads_of(node: Pointwise | Reduction) -> list[Read]:
    """Every (buffer, index) the body loads, in order (read once per body, then kept)."""
    if node.reads_memo is None:
        deps = DepsHandler()
        call_body(node, deps)
        node.reads_memo = deps.reads
    return list(node.reads_memo)


@dataclass(frozen=True, slots=True)
class _Both:
    """A value under DescribeHandler: the printer's and the tree builder's."""

    text: Any
    tree: Any


def _text(v: Any) -> Any:
    return v.text if isinstance(v, _Both) else v


def _tree(v: Any) -> Any:
    return v.tree if isinstance(v, _Both) else v


class DescribeHandler(Handler):
    """PrintHandler, TreeHandler and DepsHandler over one run of a body (each run builds
    the body's index expressions again). Each op goes to all three, so what they make is
    what three runs make: the tree and the reads name indirect indices `indirect0, ...`,
    as their own runs do, and the text names them by the printed variable (`tmp3`), as
    PrintHandler's run does: its indices are renamed before printing."""

    def __init__(self) -> None:
        self.printer, self.trees, self.deps = PrintHandler(), TreeHandler(), DepsHandler()
        self.rename: dict[sympy.Symbol, sympy.Symbol] = {}

    def _each(self, name: str, *args: Any) -> _Both:
        self.printer.origin = self.trees.origin = self.origin
        return _Both(getattr(self.printer, name)(*map(_text, args)),
                     getattr(self.trees, name)(*map(_tree, args)))

    def _printed(self, index: Any) -> Any:
        return sympy.sympify(index).xreplace(self.rename) if self.rename else index

    def load(self, name: str, index: Any) -> _Both:
        self.deps.load(name, index)
        self.printer.origin = self.trees.origin = self.origin
        return _Both(self.printer.load(name, self._printed(index)), self.trees.load(name, index))

    def constant(self, value: Any, dtype: torch.dtype) -> _Both:
        return self._each("constant", value, dtype)

    def index_expr(self, expr: Any, dtype: torch.dtype) -> _Both:
        self.printer.origin = self.trees.origin = self.origin
        return _Both(self.printer.index_expr(self._printed(expr), dtype),
                     self.trees.index_expr(expr, dtype))

    def to_dtype(self, x: Any, dtype: torch.dtype) -> _Both:
        return self._each("to_dtype", x, dtype)

    def where(self, cond: Any, a: Any, b: Any) -> _Both:
        return self._each("where", cond, a, b)

    def masked(self, mask: Any, body: Callable[[], Any], other: float) -> _Both:
        inner = body()
        self.printer.origin = self.trees.origin = self.origin
        return _Both(self.printer.masked(_text(mask), lambda: _text(inner), other),
                     self.trees.masked(_tree(mask), lambda: _tree(inner), other))

    def indirect_indexing(self, x: Any, size: int) -> sympy.Symbol:
        self.deps.indirect_indexing(x, size)
        printed = self.printer.indirect_indexing(_text(x), size)
        named = self.trees.indirect_indexing(_tree(x), size)
        self.rename[named] = printed
        return named

    def _unary(self, name: str, x: Any) -> _Both:
        return self._each(name, x)

    def _binary(self, name: str, a: Any, b: Any) -> _Both:
        return self._each(name, a, b)


def describe(node: Pointwise | Reduction) -> dict[str, Any]:
    """Text, tree and reads of a loop body, as the lowering event shows them."""
    handler = DescribeHandler()
    variables, value = call_body(node, handler)
    if node.reads_memo is None:
        node.reads_memo = handler.deps.reads
    result, tree = _text(value), _tree(value)
    body = [f"def inner_fn({', '.join(map(str, variables))}):"]
    body += [f"    {line}" for line in handler.printer.lines]
    if isinstance(node, Reduction):
        body.append(f"    return reduction({node.reduction_type}, {result})")
        tree = {"op": "reduction", "reduction_type": node.reduction_type, "args": [tree]}
    else:
        body.append(f"    return {result}")
    seen: dict[tuple[str, str], None] = {}
    for r in reads_of(node):
        seen[(r.buffer, pexpr(r.index))] = None
    return {
        "text": "\n".join(body),
        "tree": tree,
        "reads": [{"buffer": b, "index": i} for b, i in seen],
    }
