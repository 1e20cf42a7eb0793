"""Indexing: every sympy expression in the compiler is made and simplified here.

Loop variables are non-negative integer symbols (`i0, i1, ...` for output dims, `r0, ...`
for reduction dims). Index expressions are sympy expressions over them. Integer division
and modulo use two small sympy functions, FloorDiv and ModularIndexing, that print
cleanly in Triton (`//`, `%`) and C++ (`/`, `%`) through index_print.py.

`merge_loops` is the loop simplification that turns `64*i0 + i1` over sizes (16, 64)
into `j` over (1024,), so contiguous kernels stay one-dimensional.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import sympy
import sympy.tensor.tensor  # noqa: F401  (sympy's Add imports it on first use: ~90 ms)
from sympy.core.cache import cacheit
from sympy.core.parameters import global_parameters

Expr: TypeAlias = sympy.Expr


@functools.cache
def sym(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


def expand(expr: Expr) -> Expr:
    """sympy.expand, skipped when there is nothing to expand (no power, no product over a
    sum): index expressions mostly arrive expanded, and a cold `expand` walks every hint."""
    expr = sympy.sympify(expr)
    return sympy.expand(expr) if _expandable(expr) else expr


def _expandable(expr: Expr) -> bool:
    if expr.is_Atom:
        return False
    if expr.is_Pow:
        return True
    if expr.is_Mul and any(a.is_Add for a in expr.args):
        return True
    return any(_expandable(a) for a in expr.args)


def index_vars(prefix: str, n: int) -> list[sympy.Symbol]:
    return [sym(f"{prefix}{i}") for i in range(n)]


class _IndexFunction(sympy.Function):
    """FloorDiv and ModularIndexing: sympy Functions whose construction skips what
    sympy's generic path does for every new application (a FiniteSet of its argument
    counts, a float check of every argument: about 0.1 ms each, cold, and index
    expressions make hundreds). The result is the one sympy's path gives: `eval`'s
    answer, or the unevaluated node with the same `nargs`; anything unusual (options,
    `evaluate(False)`, a wrong argument count, float arguments) goes sympy's way."""

    _nargs_set: Any = None  # FiniteSet of the argument counts, made once per class

    @cacheit
    def __new__(cls, *args: Any, **options: Any) -> Any:
        if options or not global_parameters.evaluate or len(args) not in cls._nargs:
            return super().__new__(cls, *args, **options)
        args = tuple(sympy.sympify(a) for a in args)
        if any(a.is_Float or (a.is_Add and a.is_number) for a in args):
            return super().__new__(cls, *args)
        evaluated = cls.eval(*args)
        if evaluated is not None:
            return evaluated
        obj = sympy.Expr.__new__(cls, *args)
        if cls._nargs_set is None:
            cls._nargs_set = cls.nargs
        obj.nargs = cls._nargs_set
        return obj


class FloorDiv(_IndexFunction):
    """base // divisor for non-negative integers."""

    is_integer = True
    nargs = (2,)

    @classmethod
    def eval(cls, base: Expr, divisor: Expr) -> Expr | None:
        if divisor == 1:
            return base
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if isinstance(base, FloorDiv):
            return FloorDiv(base.args[0], base.args[1] * divisor)
        if divisor.is_Integer and _within(base, int(divisor)):
            return sympy.Integer(0)
        if isinstance(base, ModularIndexing) and divisor.is_Integer and \
                base.args[2].is_Integer and int(base.args[2]) % int(divisor) == 0:
            b, d, m = base.args
            return ModularIndexing(b, d * divisor, m // divisor)
        if isinstance(base, sympy.Add) and divisor.is_Integer:
            # Terms that are multiples of the divisor come out of the division whole:
            # (k*d*p + r) // d is k*p + r // d for any r >= 0.
            whole, rest = _split_multiples(base, int(divisor))
            low = _min_value(rest)
            if whole != 0 and low is not None and low >= 0:
                return whole / divisor + FloorDiv(rest, divisor)
        if divisor.is_Integer and (f := _factor_out(base, int(divisor))) is not None:
            return FloorDiv(*f)
        return None


def _split_multiples(expr: Expr, k: int) -> tuple[Expr, Expr]:
    whole: list[Expr] = []
    rest: list[Expr] = []
    for t in sympy.Add.make_args(expr):
        c, _ = t.as_coeff_Mul()
        (whole if c.is_Integer and int(c) % k == 0 else rest).append(t)
    # one Add each: adding the terms one at a time re-flattens the sum at every step
    return sympy.Add(*whole), sympy.Add(*rest)


def _nonnegative_rest(base: Expr, span: int) -> Expr | None:
    """`base` less its multiples of `span`, its constant modulo `span`; None if unchanged
    or possibly negative."""
    whole, rest = _split_multiples(base, span)
    const, terms = rest.as_coeff_Add()
    if const.is_Integer and int(const) % span != int(const):
        rest = terms + int(const) % span
    elif whole == 0:
        return None
    low = _min_value(rest)
    return rest if low is not None and low >= 0 else None


def _max_value(expr: Expr, bounds: dict[sympy.Symbol, int] | None = None) -> int | None:
    """Largest value a non-negative index expression can take, where easy to tell."""
    if expr.is_Integer:
        return int(expr)
    if bounds and expr in bounds:
        return bounds[expr]
    if isinstance(expr, FloorDiv) and expr.args[1].is_Integer:
        inner = _max_value(expr.args[0], bounds)
        return inner // int(expr.args[1]) if inner is not None else None
    if isinstance(expr, ModularIndexing) and expr.args[2].is_Integer:
        return int(expr.args[2]) - 1
    if isinstance(expr, sympy.Mul):
        total = 1
        for factor in expr.args:
            v = _max_value(factor, bounds)
            if v is None or v < 0:
                return None
            total *= v
        return total
    if isinstance(expr, sympy.Add):
        total = 0
        for t in expr.args:
            v = _max_value(t, bounds)
            if v is None:
                return None
            total += v
        return total
    return None


def _min_value(expr: Expr) -> int | None:
    """Smallest value an index expression can take, where easy to tell (symbols and the
    FloorDiv / ModularIndexing atoms are non-negative)."""
    if expr.is_Integer:
        return int(expr)
    if isinstance(expr, (sympy.Symbol, FloorDiv, ModularIndexing)):
        return 0
    if isinstance(expr, sympy.Mul):
        lows = [_min_value(f) for f in expr.args]
        return 0 if all(v is not None and v >= 0 for v in lows) else None
    if isinstance(expr, sympy.Add):
        lows = [_min_value(t) for t in expr.args]
        return None if any(v is None for v in lows) else sum(v for v in lows if v is not None)
    return None


def _within(expr: Expr, k: int, bounds: dict[sympy.Symbol, int] | None = None) -> bool:
    """0 <= expr < k, where easy to tell."""
    lo, hi = _min_value(expr), _max_value(expr, bounds)
    return lo is not None and lo >= 0 and hi is not None and hi < k


def _factor_out(base: Expr, div: int,
                bounds: dict[sympy.Symbol, int] | None = None) -> tuple[Expr, int] | None:
    """(k*a + r) // (k*m) is a // m when 0 <= r < k: a k among the coefficients of `base`
    that divides `div` (largest first), as (a, m). A view of a permuted or split view
    gives such sums: `(2304*s + 768*c + e) // 147456` with c < 3, e < 768 is `s // 64`."""
    terms = [t.as_coeff_Mul() for t in sympy.Add.make_args(base)]
    ks = sorted({int(c) for c, _ in terms if c.is_Integer and int(c) > 1 and div % int(c) == 0},
                reverse=True)
    for k in ks:
        whole, rest = _split_multiples(base, k)
        if whole != 0 and (rest == 0 or _within(rest, k, bounds)):
            return expand(whole / k), div // k
    return None


class ModularIndexing(_IndexFunction):
    """(base // divisor) % modulus for non-negative integers."""

    is_integer = True
    nargs = (3,)

    @classmethod
    def eval(cls, base: Expr, divisor: Expr, modulus: Expr) -> Expr | None:
        if modulus == 1 or base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        if isinstance(base, FloorDiv):
            return ModularIndexing(base.args[0], base.args[1] * divisor, modulus)
        if isinstance(base, ModularIndexing) and divisor.is_Integer and modulus.is_Integer \
                and base.args[2].is_Integer \
                and int(base.args[2]) % (int(divisor) * int(modulus)) == 0:
            b, d, _ = base.args
            return ModularIndexing(b, d * divisor, modulus)
        if isinstance(base, sympy.Add) and divisor.is_Integer and modulus.is_Integer:
            # Multiples of divisor*modulus change nothing (a constant counts by its rest), if
            # what is left stays >= 0: the kernels' `//` and `%` truncate (C's, Triton's).
            if (rest := _nonnegative_rest(base, int(divisor) * int(modulus))) is not None:
                return ModularIndexing(rest, divisor, modulus)
        if divisor == 1 and modulus.is_Integer and _within(base, int(modulus)):
            return base
        if divisor.is_Integer and (f := _factor_out(base, int(divisor))) is not None:
            return ModularIndexing(f[0], f[1], modulus)
        return None


def linear_stride(expr: Expr, var: sympy.Symbol) -> Expr | None:
    """Coefficient of `var` if `expr` is linear in it, else None."""
    if var not in expr.free_symbols:
        return sympy.Integer(0)
    expanded = expand(expr)
    coeff = expanded.coeff(var)
    if var in coeff.free_symbols or var in (expanded - coeff * var).free_symbols:
        return None
    return coeff


def contiguous_strides(size: Sequence[int]) -> list[int]:
    strides, acc = [], 1
    for s in reversed(size):
        strides.append(acc)
        acc *= int(s)
    return list(reversed(strides))


def dense_strides_like(size: Sequence[int], stride: Sequence[int]) -> list[int]:
    """Dense strides in the dim order of `stride` (what `empty_like` gives a tensor with
    gaps): sorted innermost first by stride, ties to the smaller size, a 0 stride ambiguous
    (ATen's `infer_dense_strides`)."""
    perm = list(reversed(range(len(size))))

    def swap(d0: int, d1: int) -> bool:
        s0, s1 = int(stride[d0]), int(stride[d1])
        if s0 == 0 or s1 == 0:
            return False
        return s0 > s1 or (s0 == s1 and int(size[d0]) > int(size[d1]))

    for i in range(1, len(perm)):
        j = i
        while j > 0 and swap(perm[j - 1], perm[j]):
            perm[j - 1], perm[j] = perm[j], perm[j - 1]
            j -= 1
    out, acc = [0] * len(size), 1
    for d in perm:
        out[d] = acc
        acc *= max(int(size[d]), 1)
    return out


def strided_index(index: Sequence[Expr], stride: Sequence[int], offset: int = 0) -> Expr:
    return _strided_index(tuple(index), tuple(stride), offset)


# Every ops handler (describe, reads, codegen) runs a loop body with the same index
# expressions, so each load's address is built once, not once per handler.
@functools.lru_cache(maxsize=1 << 16)
def _strided_index(index: tuple[Expr, ...], stride: tuple[int, ...], offset: int) -> Expr:
    # One Add of all terms: adding them one at a time re-flattens the sum at every step.
    return sympy.Add(sympy.Integer(offset), *(i * s for i, s in zip(index, stride) if s != 0))


def merge_loops(
    sizes: Sequence[int], exprs: Sequence[Expr], var_names: Sequence[sympy.Symbol]
) -> tuple[list[int], Callable[[Expr, Sequence[Expr]], Expr]]:
    """Merge adjacent loop dims that every index expression walks contiguously.

    Returns the new sizes and `rewrite(expr, new_vars)`, which re-expresses an index
    written over the old variables in the new ones. Size-1 dims disappear.
    """
    groups: list[list[int]] = [[k] for k in range(len(sizes)) if sizes[k] != 1]
    merged = True
    while merged and len(groups) > 1:
        merged = False
        for g in range(len(groups) - 1, 0, -1):
            outer, inner = groups[g - 1], groups[g]
            if _mergeable(sizes, exprs, var_names, outer[-1], inner[0], inner):
                groups[g - 1] = outer + inner
                del groups[g]
                merged = True
                break
    new_sizes = [math.prod(int(sizes[k]) for k in grp) for grp in groups]
    dropped = {var_names[k]: sympy.Integer(0) for k in range(len(sizes)) if sizes[k] == 1}

    def rewrite(expr: Expr, new_vars: Sequence[Expr]) -> Expr:
        expr = sympy.sympify(expr).xreplace(dropped)
        subs: dict[sympy.Symbol, Expr] = {}
        linear_part: Expr = sympy.Integer(0)
        for grp, v in zip(groups, new_vars):
            if len(grp) == 1:
                subs[var_names[grp[0]]] = v
                continue
            stride = linear_stride(expr, var_names[grp[-1]])
            assert stride is not None, "merged loops must be linear"
            linear_part += stride * v
            for k in grp:
                subs[var_names[k]] = sympy.Integer(0)
        return expand(expr.xreplace(subs) + linear_part)

    return new_sizes, rewrite


def _mergeable(
    sizes: Sequence[int],
    exprs: Sequence[Expr],
    var_names: Sequence[sympy.Symbol],
    outer: int,
    inner_first: int,
    inner_group: list[int],
) -> bool:
    inner_size = math.prod(int(sizes[k]) for k in inner_group)
    for e in exprs:
        so = linear_stride(e, var_names[outer])
        si = linear_stride(e, var_names[inner_first])
        if so is None or si is None or sympy.simplify(so - si * inner_size) != 0:
            return False
    return True


def decompose(flat: Expr, sizes: Sequence[int]) -> list[Expr]:
    """Row-major coordinates of flat position `flat` in a loop nest of `sizes`."""
    return list(_decompose(sympy.sympify(flat), tuple(int(s) for s in sizes)))


@functools.lru_cache(maxsize=1 << 14)  # views and codegen decompose the same positions
def _decompose(flat: Expr, sizes: tuple[int, ...]) -> tuple[Expr, ...]:
    out: list[Expr] = []
    inner = math.prod(map(int, sizes))
    for k, s in enumerate(sizes):
        inner //= int(s)
        if k == 0:
            out.append(FloorDiv(flat, inner))
        else:
            out.append(ModularIndexing(flat, inner, s))
    return tuple(out)


def _as_mod(atom: Expr) -> tuple[Expr, Expr, Expr] | None:
    """View an index atom as ModularIndexing(base, divisor, modulus); modulus oo = none."""
    if isinstance(atom, ModularIndexing):
        return atom.args[0], atom.args[1], atom.args[2]
    if isinstance(atom, FloorDiv):
        return atom.args[0], atom.args[1], sympy.oo
    if isinstance(atom, sympy.Symbol):
        return atom, sympy.Integer(1), sympy.oo
    return None


def _from_mod(base: Expr, div: Expr, mod: Expr) -> Expr:
    if mod is sympy.oo:
        return FloorDiv(base, div)
    return ModularIndexing(base, div, mod)


def join_dimensions(expr: Expr) -> Expr:
    """Fold c*a*(x//(d*a)) + c*((x//d) % a) back into c*(x//d), and friends.

    Splitting a flat index into coordinates and multiplying by contiguous strides gives
    these sums; folding them makes contiguous accesses print as plain `xindex`.
    """
    expr = expand(expr)
    changed = True
    while changed and isinstance(expr, sympy.Add):
        changed = False
        terms = [t.as_coeff_Mul() for t in expr.args]
        for i, (c1, a1) in enumerate(terms):
            m1 = _as_mod(a1)
            if m1 is None or m1[2] is sympy.oo:
                continue
            for j, (c2, a2) in enumerate(terms):
                m2 = _as_mod(a2)
                if i == j or m2 is None or m2[0] != m1[0]:
                    continue
                if m2[1] == m1[1] * m1[2] and c2 == c1 * m1[2]:
                    joined = c1 * _from_mod(m1[0], m1[1], m2[2] * m1[2]
                                            if m2[2] is not sympy.oo else sympy.oo)
                    rest = [c * a for k, (c, a) in enumerate(terms) if k not in (i, j)]
                    expr = expand(sympy.Add(joined, *rest))
                    changed = True
                    break
            if changed:
                break
    return expr


def simplify_index(expr: Expr, bounds: dict[sympy.Symbol, int] | None = None) -> Expr:
    """Expand, simplify inside FloorDiv/ModularIndexing bottom-up, and join dimensions.

    `bounds` gives the largest value of some symbols (a kernel's xindex and rindex: lanes
    past the end are masked, so their addresses never matter), which lets
    `(1000*xindex + rindex) // 1000` become `xindex`.
    """
    key = tuple(sorted(bounds.items(), key=lambda kv: kv[0].name)) if bounds else ()
    return _simplify_cached(sympy.sympify(expr), key)


@functools.lru_cache(maxsize=1 << 16)
def _simplify_cached(expr: Expr, bounds_key: tuple[tuple[sympy.Symbol, int], ...]) -> Expr:
    return _simplify(expr, dict(bounds_key) if bounds_key else None)


def _simplify(expr: Expr, bounds: dict[sympy.Symbol, int] | None) -> Expr:
    if isinstance(expr, (FloorDiv, ModularIndexing)):
        args = [simplify_index(a, bounds) for a in expr.args]
        return join_dimensions(_bounded(type(expr)(*args), bounds))
    if expr.args and not expr.is_Atom:
        expr = expr.func(*[simplify_index(a, bounds) for a in expr.args])
    return join_dimensions(expand(expr))


def _bounded(expr: Expr, bounds: dict[sympy.Symbol, int] | None) -> Expr:
    """Division and modulo rules that need to know how large the operands get."""
    if not bounds or not isinstance(expr, (FloorDiv, ModularIndexing)):
        return expr
    base, div = expr.args[0], expr.args[1]
    if not div.is_Integer:
        return expr
    if isinstance(expr, FloorDiv):
        whole, rest = _split_multiples(base, int(div))
        if _within(rest, int(div), bounds):
            return expand(whole / div)
        if (f := _factor_out(base, int(div), bounds)) is not None:
            return simplify_index(FloorDiv(*f), bounds)
        return expr
    mod = expr.args[2]
    if not mod.is_Integer:
        return expr
    if (f := _factor_out(base, int(div), bounds)) is not None:
        return simplify_index(ModularIndexing(f[0], f[1], mod), bounds)
    top, low = _max_value(base, bounds), _min_value(base)
    if top is None or low is None or low < 0:  # a negative base wraps below zero
        return expr
    if top < int(div):
        return sympy.Integer(0)
    if top // int(div) < int(mod):  # the modulo never wraps
        return FloorDiv(base, div)
    return expr


def steps_along_outputs(loads: Sequence[Expr], x: sympy.Symbol, xnumel: int, r: sympy.Symbol,
                        rnumel: int) -> tuple[int, int] | None:
    """How loads (flat indices over an output position x < xnumel and a reduction
    position r < rnumel) walk memory as x steps: (loads that step 1 along x almost
    everywhere, loads that do not move with x), or None when some load does neither (or
    its index holds other symbols: an indirect load). Measured at a few points, so an
    index through views that divide or wrap (a permuted producer, one of q/k/v selected
    from a stacked tensor) counts by what it does almost everywhere: a layout choice
    made with it changes speed, never results."""
    if xnumel < 2 or rnumel < 1:
        return None
    xs = sorted({0, 1, xnumel // 3, xnumel // 2 + 1, xnumel - 2})
    rs = sorted({0, rnumel // 3, rnumel // 2, rnumel - 1})
    along = still = 0
    for index in loads:
        if not index.free_symbols <= {x, r}:
            return None

        def at(xv: int, rv: int, index: Expr = index) -> int:
            return int(index.xreplace({x: sympy.Integer(xv), r: sympy.Integer(rv)}))

        steps = [at(xv + 1, rv) - at(xv, rv) for xv in xs for rv in rs]
        if all(st == 0 for st in steps):
            still += 1
        elif sum(st == 1 for st in steps) * 4 >= len(steps) * 3:
            along += 1
        else:
            return None
    return along, still
