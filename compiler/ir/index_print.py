"""How index expressions are spelled: in Triton (`//`, `%`), in C++ (`/`, `%`, 64-bit
integer literals) and in the IR text the UI shows, with sums in the order of their terms'
sympy spelling. One exact printer of our own for the expressions indexing makes; sympy's
printer for anything else (it hands ours back for the parts it recognises).
"""

from __future__ import annotations

import functools
from typing import Any

import sympy
from sympy.printing.str import StrPrinter

from kernelscope.compiler.ir.indexing import Expr, FloorDiv, ModularIndexing


class IndexSpelling:
    """How index expressions are printed in our kernels and IR text: `//` or `/` for
    floor division, `%`, sums in the order of their terms' sympy spelling (numbers
    last), `-` for negative terms, and (C++) an `L` on integers past 32 bits.

    Every rule is here, written as plain recursion over the node types index
    expressions are made of; sympy's own printer is only asked for other node types,
    through `_SympyFallback`, which hands the types above back to this class. (sympy's
    printer dispatches per node and is about 0.3 ms a term cold.)"""

    def __init__(self, floordiv: str, long_suffix: bool) -> None:
        self.floordiv = floordiv
        self.long_suffix = long_suffix
        self.fallback = _SympyFallback(self)

    def text(self, e: Expr) -> str:
        if type(e) is sympy.Symbol:
            return e.name
        if e.is_Integer:
            v = int(e)
            return f"{v}L" if self.long_suffix and abs(v) > 2**31 - 1 else str(v)
        if isinstance(e, FloorDiv):
            a, b = e.args
            return f"({self._atom(a)} {self.floordiv} {self.text(b)})"
        if isinstance(e, ModularIndexing):
            a, d, m = e.args
            base = self._atom(a) if d == 1 else \
                f"({self._atom(a)} {self.floordiv} {self.text(d)})"
            return f"({base} % {self.text(m)})"
        if isinstance(e, sympy.Mul):
            c, rest = e.as_coeff_Mul()
            if c == -1:
                return f"-{self.text(rest)}"
            if c != 1:
                return f"{self.text(c)}*{self.text(rest)}"
            return "*".join(self.text(a) for a in e.args)
        if isinstance(e, sympy.Add):
            terms = sorted(e.args, key=lambda t: (t.is_number, _str(t)))
            out = self.text(terms[0])
            for t in terms[1:]:
                s = self.text(t)
                out += f" - {s[1:]}" if s.startswith("-") else f" + {s}"
            return out
        return self.fallback.doprint(e)

    def _atom(self, e: Expr) -> str:
        text = self.text(e)
        return f"({text})" if isinstance(e, (sympy.Add, sympy.Mul)) else text


class _SympyFallback(StrPrinter):
    """sympy's printer for node types IndexSpelling does not spell itself; the types it
    does spell, met inside them, go back to it."""

    def __init__(self, spelling: IndexSpelling) -> None:
        super().__init__()
        self.spelling = spelling

    def _ours(self, e: Expr, order: str | None = None) -> str:
        return self.spelling.text(e)

    _print_FloorDiv = _print_ModularIndexing = _print_Mul = _print_Add = _print_Integer = _ours


PYTHON_SPELLING = IndexSpelling("//", long_suffix=False)
CPP_SPELLING = IndexSpelling("/", long_suffix=True)


# Printing and simplifying are pure functions of immutable sympy expressions, and the same
# indices come back many times while one graph is generated: memoized (compile time).
@functools.lru_cache(maxsize=1 << 16)
def _str(e: Expr) -> str:
    """str(e), the order of a sum's terms when printed. sympy's printer is slow (about
    0.3 ms a term, cold); the usual terms (`i0`, `64*i0`, `FloorDiv(i0, 64)`, sums of
    such over plain symbols) are spelled here exactly as it spells them, and anything
    else is left to it."""
    fast = _plain_str(e)
    return fast if fast is not None else str(e)


def sympy_str(e: Expr) -> str:
    """str(e) (sympy's own spelling, e.g. for messages), memoized."""
    return _str(sympy.sympify(e))


def _plain_str(e: Expr) -> str | None:
    if type(e) is sympy.Symbol:
        return str(e.name)
    if e.is_Integer:
        return str(int(e))
    if e.is_Mul and len(e.args) == 2 and e.args[0].is_Integer and \
            (type(e.args[1]) is sympy.Symbol or isinstance(e.args[1], (FloorDiv,
                                                                       ModularIndexing))):
        inner = _plain_str(e.args[1])
        if inner is None:
            return None
        c = int(e.args[0])
        return f"-{inner}" if c == -1 else f"{c}*{inner}"
    if isinstance(e, (FloorDiv, ModularIndexing)):
        args = [_plain_str(a) for a in e.args]
        if all(a is not None for a in args):
            return f"{type(e).__name__}({', '.join(args)})"  # type: ignore[arg-type]
        return None
    if isinstance(e, sympy.Add):
        return _linear_str(e)
    return None


def _linear_str(e: sympy.Add) -> str | None:
    """str() of a sum of integer multiples of symbols and FloorDiv/ModularIndexing terms,
    in sympy's order (`_ordered_terms`), with its signs."""
    terms = _ordered_terms(e)
    spelled = [_plain_str(t) for t in terms] if terms is not None else [None]
    parts = [p for p in spelled if p is not None]
    if len(parts) < len(spelled):
        return None
    out = parts[0]
    for p in parts[1:]:
        out += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
    return out


def _ordered_terms(e: sympy.Add) -> list[Expr] | None:
    """e.as_ordered_terms() (the order str() prints a sum in), for sums of integer
    multiples of distinct generators (symbols, FloorDiv, ModularIndexing) and an integer:
    each term is a monomial of degree one, so sympy's lex order puts the terms in the
    order of their generators' sort keys, the number last; a positive number and one
    negative term (`5 - i0`) keep the number first. None: another kind of sum."""
    const: Expr | None = None
    keyed: list[tuple[tuple[Any, ...], Expr]] = []
    for t in e.args:
        if t.is_Integer:
            const = t
            continue
        gen = t.args[1] if t.is_Mul and len(t.args) == 2 and t.args[0].is_Integer else t
        key = _sort_key(gen) if _is_generator(gen) else None
        if key is None:
            return None
        keyed.append((key, t))
    if const is not None and len(keyed) == 1 and keyed[0][1].is_Mul and const > 0 \
            and keyed[0][1].args[0] < 0:
        return [const, keyed[0][1]]
    keyed.sort(key=lambda kt: kt[0])
    return [t for _, t in keyed] + ([const] if const is not None else [])


def _is_generator(e: Expr) -> bool:
    return type(e) is sympy.Symbol or isinstance(e, (FloorDiv, ModularIndexing))


_ONE_KEY = sympy.S.One.sort_key()
_CLASS_KEYS: dict[type, tuple[int, int, str]] = {}


def _sort_key(e: Expr) -> tuple[Any, ...] | None:
    """default_sort_key(e), for the node types of `_ordered_terms`' sums (sympy's own
    computes a sum's ordered terms over again, through complex numbers, for each)."""
    if type(e) is sympy.Symbol or e.is_Integer:
        return e.sort_key()  # type: ignore[no-any-return]
    coeff, base = e.as_coeff_Mul()
    if type(base) is sympy.Symbol:
        return base.class_key(), (1, (base.name,)), _ONE_KEY, coeff
    if isinstance(base, (FloorDiv, ModularIndexing)):
        args = [_sort_key(a) for a in base.args]
        cls = type(base)
        if cls not in _CLASS_KEYS:
            _CLASS_KEYS[cls] = cls.class_key()
        key_of = _CLASS_KEYS[cls]
    elif isinstance(base, sympy.Add) and coeff == 1:
        terms = _ordered_terms(base)
        args = [_sort_key(t) for t in terms] if terms is not None else [None]
        key_of = sympy.Add.class_key()
    else:
        return None
    if any(a is None for a in args):
        return None
    return key_of, (len(args), tuple(args)), _ONE_KEY, coeff


def pexpr(expr: Expr) -> str:
    return _pexpr(sympy.sympify(expr))


def cexpr(expr: Expr) -> str:
    return _cexpr(sympy.sympify(expr))


@functools.lru_cache(maxsize=1 << 16)
def _pexpr(expr: Expr) -> str:
    return PYTHON_SPELLING.text(expr)


@functools.lru_cache(maxsize=1 << 16)
def _cexpr(expr: Expr) -> str:
    return CPP_SPELLING.text(expr)
