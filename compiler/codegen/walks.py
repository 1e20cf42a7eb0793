"""How a kernel's indices walk memory: pure functions the kernel and backends choose
loop orders and fused walks with."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy

from kernelscope.compiler.codegen.common import RINDEX, XINDEX
from kernelscope.compiler.ir.index_print import sympy_str
from kernelscope.compiler.ir.indexing import (
    FloorDiv,
    ModularIndexing,
    decompose,
    index_vars,
    linear_stride,
    simplify_index,
    sym,
)
from kernelscope.compiler.ir.nodes import ComputedBuffer
from kernelscope.compiler.schedule.domain import split_point
from kernelscope.compiler.schedule.nodes import canonical


def split_vars(ranges: list[int], outer_numel: int, outer: sympy.Symbol,
                inner: sympy.Symbol, inner_numel: int) -> list[Any]:
    """Coordinates of a loop nest iterated as (outer, inner): split at the dims whose
    product is outer_numel, else through the flat position."""
    k = split_point(ranges, outer_numel)
    if k is None:
        return decompose(outer * inner_numel + inner, ranges)
    return decompose(outer, ranges[:k]) + decompose(inner, ranges[k:])


def suffix_point(ranges: list[int], inner_numel: int) -> int | None:
    """The k with prod(ranges[k:]) == inner_numel (the last such), if any."""
    j = split_point(ranges[::-1], inner_numel)
    return None if j is None else len(ranges) - j


def storage_coords(buf: ComputedBuffer, flat: sympy.Expr) -> list[Any]:
    """A buffer's logical coordinates of the element at storage index `flat`."""
    lay = buf.layout
    order = sorted(range(len(lay.size)), key=lambda k: -lay.stride[k])
    coords: list[Any] = [sympy.Integer(0)] * len(lay.size)
    dims = [k for k in order if lay.size[k] != 1]
    for pos, k in enumerate(dims):
        st, sz = lay.stride[k], lay.size[k]
        base = flat - lay.offset
        coords[k] = FloorDiv(base, st) if pos == 0 else ModularIndexing(base, st, sz)
    return coords


def dense_walk(index: sympy.Expr, variables: Sequence[sympy.Symbol], sizes: Sequence[int],
               numel: int) -> bool:
    """`index` over the loop nest (variables, sizes) visits storage positions 0 .. numel - 1
    once each: after splitting variables a view divides, it is linear with strides 1,
    then each the previous stride times the previous size."""
    names, extents = list(variables), [int(s) for s in sizes]
    expr = simplify_index(index, {v: n - 1 for v, n in zip(names, extents)})
    for step in range(16):
        cut = _dividing_cut(expr, names, extents)
        if cut is None:
            break
        k, d = cut
        hi, lo = sym(f"_hi{step}"), sym(f"_lo{step}")
        split = {names[k]: d * hi + lo}
        names[k:k + 1], extents[k:k + 1] = [hi, lo], [extents[k] // d, d]
        expr = simplify_index(expr.xreplace(split), {v: n - 1 for v, n in zip(names, extents)})
    sizes_c, expr = canonical(expr, names, extents)
    cs = index_vars("c", len(sizes_c))
    strides = [linear_stride(expr, c) for c in cs]
    if any(st is None or not st.is_Integer for st in strides):
        return False
    rest = expr - sum((st * c for st, c in zip(strides, cs)), sympy.Integer(0))
    if rest != 0:  # a shifted read (a pooling window's neighbour) is no walk of the node
        return False
    expect = 1
    for st, sz in sorted(zip([int(st) for st in strides], sizes_c)):  # type: ignore[arg-type]
        if st != expect:
            return False
        expect *= sz
    return expect == numel


def _dividing_cut(expr: sympy.Expr, names: list[sympy.Symbol], extents: list[int]
                  ) -> tuple[int, int] | None:
    """(k, d): variable k appears as `v // d` or `(v // d) % m` (or `v % d`) with d a
    proper divisor of its extent."""
    for atom in sorted(expr.atoms(FloorDiv, ModularIndexing), key=sympy_str):
        base = atom.args[0]
        if base not in names:
            continue
        k = names.index(base)
        n = extents[k]
        if isinstance(atom, FloorDiv):
            cuts = [int(atom.args[1])]
        else:
            div, mod = int(atom.args[1]), int(atom.args[2])
            cuts = [div, div * mod] if div > 1 else [mod]
        for d in cuts:
            if 1 < d < n and n % d == 0:
                return k, d
    return None


def walks_columns(loads: Sequence[sympy.Expr]) -> bool:
    """Every load in a reduction loop steps 1 along the outputs and more along the
    reduction (x.sum(0)): both backends then reorder the loops."""
    if not loads:
        return False
    for index in loads:
        if not index.free_symbols <= {XINDEX, RINDEX}:
            return False
        # the coefficients (None: not linear), what sympy.diff gives for linear indices
        dx, dr = linear_stride(index, XINDEX), linear_stride(index, RINDEX)
        if dx != 1 or dr is None or not (dr.is_Integer and dr > 1):
            return False
    return True
