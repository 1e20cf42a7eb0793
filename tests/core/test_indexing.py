"""Index arithmetic: simplification, loop merging, printing."""

from __future__ import annotations

import math
import random

import sympy

from kernelscope.compiler.ir.index_print import cexpr, pexpr, sympy_str
from kernelscope.compiler.ir.indexing import (
    FloorDiv,
    ModularIndexing,
    decompose,
    index_vars,
    merge_loops,
    simplify_index,
    strided_index,
    sym,
)

X = sym("xindex")


def test_contiguous_decomposition_folds_back_to_the_flat_index() -> None:
    for sizes in ([16, 64], [4, 16, 64], [3, 5, 7, 2]):
        strides = [1]
        for s in reversed(sizes[1:]):
            strides.insert(0, strides[0] * s)
        expr = strided_index(decompose(X, sizes), strides)
        assert simplify_index(expr) == X


def test_transposed_access_keeps_its_coordinates() -> None:
    expr = simplify_index(strided_index(decompose(X, [16, 64]), [1, 16]))
    assert pexpr(expr) == "16*(xindex % 64) + (xindex // 64)"


def test_floordiv_of_a_joined_sum_simplifies() -> None:
    base = 16 * ModularIndexing(X, 16, 16) + 256 * FloorDiv(X, 256) + ModularIndexing(X, 1, 16)
    assert simplify_index(FloorDiv(base, 16)) == FloorDiv(X, 16)
    assert simplify_index(ModularIndexing(base, 16, 16)) == ModularIndexing(X, 16, 16)


def test_printers_parenthesize_sums_inside_division() -> None:
    # Regression: `a + b // c` once printed where `(a + b) // c` was meant.
    expr = FloorDiv(X + 3, 4)
    assert pexpr(expr) == "((xindex + 3) // 4)"
    assert cexpr(expr) == "((xindex + 3) / 4)"
    assert cexpr(ModularIndexing(X + 3, 2, 5)) == "(((xindex + 3) / 2) % 5)"


def test_merge_loops_merges_only_contiguous_dims() -> None:
    i0, i1 = index_vars("i", 2)
    sizes, rewrite = merge_loops([16, 64], [64 * i0 + i1], [i0, i1])
    assert sizes == [1024]
    c0 = sym("c0")
    assert rewrite(64 * i0 + i1, [c0]) == c0
    sizes, _ = merge_loops([16, 64], [64 * i0 + i1, 16 * i1 + i0], [i0, i1])
    assert sizes == [16, 64]


def test_size_one_dims_disappear() -> None:
    i0, i1, i2 = index_vars("i", 3)
    sizes, rewrite = merge_loops([8, 1, 4], [4 * i0 + i2], [i0, i1, i2])
    assert sizes == [32]
    assert rewrite(4 * i0 + i2 + 0 * i1, [sym("c0")]) == sym("c0")


def test_integer_evaluation() -> None:
    assert FloorDiv(sympy.Integer(17), sympy.Integer(5)) == 3
    assert ModularIndexing(sympy.Integer(17), sympy.Integer(2), sympy.Integer(5)) == 3


def test_bounds_let_masked_lanes_simplify() -> None:
    r = sym("rindex")
    bounds = {X: 63, r: 999}
    assert simplify_index(FloorDiv(1000 * X + r, 1000), bounds) == X
    assert simplify_index(ModularIndexing(1000 * X + r, 1, 1000), bounds) == r
    # Without bounds nothing is assumed about rindex.
    assert simplify_index(FloorDiv(1000 * X + r, 1000)) != X


def test_products_of_symbols_do_not_confuse_bounds() -> None:
    # Regression: a product of two symbols once recursed forever while bounding it.
    t = sym("tmp3")
    expr = FloorDiv(16 * t * X + 3, 8)
    assert simplify_index(expr, {X: 15}) is not None


def test_expand_skips_only_what_has_nothing_to_expand() -> None:
    """The fast path returns its input only where sympy.expand would change nothing."""
    import sympy

    from kernelscope.compiler.ir.indexing import FloorDiv, ModularIndexing, expand, sym

    a, b, c = sym("a"), sym("b"), sym("c")
    for e in [a * (b + 1), (a + b) ** 2, 3 * a + FloorDiv(a * (b + 2), 4),
              ModularIndexing(c * (a + b), 1, 8) + 2, 64 * a + b, FloorDiv(a, 4) * b,
              sympy.Integer(7), a]:
        assert expand(e) == sympy.expand(e), e
    assert expand(64 * a + b) is not None and expand(a * (b + 1)) == a * b + a


def test_sympy_str_spells_as_sympy_does() -> None:
    """The memoized spelling (the order of printed sums, names in messages) is sympy's own
    str() for the forms it spells itself and for the ones it leaves to sympy."""
    i0, i1, r0 = sym("i0"), sym("i1"), sym("r0")
    cases = [5 - i0, 5 - 3 * i0, -5 - i0, i0 - 5, 3 - i1 + i0, -i0 - i1 + 3, 64 * i1 + i0,
             r0 + 4096 * i1 + 2**40, FloorDiv(5 - i0, 2), -FloorDiv(i0, 2),
             64 * ModularIndexing(i0 + 64 * i1, 1, 8), 2 * i0 * i1, i0 / 2,
             sympy.Max(i0, i1) + 1, sympy.Integer(0), sympy.Integer(-7)]
    for e in cases:
        assert sympy_str(e) == str(e), e


def test_random_index_expressions_print_like_sympy_orders_them() -> None:
    """Sums printed by pexpr/cexpr put terms in the order of their sympy spelling (numbers
    last); random sums over the forms the compiler builds agree with str()."""
    rng = random.Random(0)
    names = [sym(n) for n in ("i0", "i1", "i2", "r0", "x0", "x10", "x2", "tmp3")]

    def term() -> sympy.Expr:
        k = rng.random()
        s = rng.choice(names)
        if k < 0.3:
            return FloorDiv(s + rng.choice(names) * 64, rng.choice([2, 3, 64]))
        if k < 0.5:
            return ModularIndexing(s, rng.choice([1, 4]), rng.choice([3, 128]))
        return s

    for _ in range(300):
        e = sympy.Add(*[term() * rng.choice([1, -1, 2, 64, -3]) for _ in range(3)],
                      rng.choice([0, 5, -5, 2**33]))
        assert sympy_str(e) == str(e), e
        if isinstance(e, sympy.Add):
            first = min(e.args, key=lambda t: (t.is_number, str(t)))
            assert pexpr(e).startswith(pexpr(first)), e


def test_printers_spell_divisions_products_and_large_integers() -> None:
    i0, i1 = sym("i0"), sym("i1")
    assert pexpr(5 - i0) == "-i0 + 5"
    assert pexpr(ModularIndexing(i0 + 3 * i1, 4, 8)) == "(((3*i1 + i0) // 4) % 8)"
    assert cexpr(ModularIndexing(i0 + 3 * i1, 4, 8)) == "(((3*i1 + i0) / 4) % 8)"
    assert pexpr(-FloorDiv(i0, 2) + 3 * i0 * i1) == "-(i0 // 2) + 3*i0*i1"
    assert cexpr(i0 + 2**40) == "i0 + 1099511627776L"
    assert pexpr(i0 + 2**40) == "i0 + 1099511627776"
    # Forms it does not spell itself go to sympy's printer, with ours inside them.
    assert pexpr(sympy.Max(FloorDiv(i0, 2), 1)) == "Max(1, (i0 // 2))"


def test_a_divisor_factors_out_of_a_split_view_index() -> None:
    # ViT's attention: an [S, B, 3, 768] view of the in-projection read as [3, S, B, 768].
    # (2304*s + 768*c + e) // 147456 with c < 3, e < 768 is s // 64; the kernel's index
    # was a tower of nested divisions before (and its loads were not vectorised).
    s, c, e = ModularIndexing(X, 768, 12608), FloorDiv(X, 9682944), ModularIndexing(X, 1, 768)
    base = 2304 * s + 768 * c + e
    bounds = {X: 3 * 197 * 64 * 768 - 1}
    assert simplify_index(FloorDiv(base, 147456), bounds) == ModularIndexing(X, 49152, 197)
    assert simplify_index(ModularIndexing(base, 2304, 64), bounds) == ModularIndexing(X, 768, 64)
    assert simplify_index(ModularIndexing(base, 768, 3), bounds) == FloorDiv(X, 9682944)
    i, j = index_vars("i", 2)
    assert FloorDiv(2304 * i, 147456) == FloorDiv(i, 64)
    assert FloorDiv(2304 * i + 768 * ModularIndexing(j, 1, 3), 4608) == FloorDiv(i, 2)


def test_a_rest_that_may_be_negative_keeps_its_division() -> None:
    # (768*i + j - 5) // 768 is i - 1 when j < 5: the rest's lower bound matters too.
    i, j = index_vars("i", 2)
    base = 768 * i + ModularIndexing(j, 1, 768) - 5
    assert FloorDiv(base, 768) != i
    assert simplify_index(FloorDiv(base, 768), {i: 10, j: 767}) != i
    assert FloorDiv(2304 * i + ModularIndexing(j, 1, 768) - 5, 4608) != FloorDiv(i, 2)


def test_whole_multiples_leave_a_division_whatever_the_rest() -> None:
    # A column split's part p of two images (1568 rows of an NHWC [64, 512, 28, 28]):
    # image 2p + r // 784 and position r % 784, at strides 401408 and 512, are the
    # linear 802816*p + 512*r (the loads step along the channels: column tiles). The
    # rest r < 1568 is not below the divisor, and the division came out all the same.
    p, r, c = index_vars("i", 3)
    n = FloorDiv(1568 * p + r, 784)
    assert n == 2 * p + FloorDiv(r, 784)
    hw = ModularIndexing(1568 * p + r, 1, 784)
    assert simplify_index(401408 * n + 512 * hw + c) == 802816 * p + 512 * r + c
    # a rest that may be negative keeps it whole (r - 5 // 784 would be -1 at r < 5)
    assert FloorDiv(1568 * p + r - 5, 784) != 2 * p + FloorDiv(r - 5, 784)


def _value(e: sympy.Expr, env: dict[sympy.Symbol, int], truncating: bool) -> int:
    """e at env: Python's floor `//` and `%` (what the index functions mean), or C's and
    Triton's truncating ones (what the kernels print)."""
    def div(a: int, b: int) -> int:
        q = abs(a) // abs(b)
        return (q if (a >= 0) == (b > 0) else -q) if truncating else a // b

    def go(x: sympy.Expr) -> int:
        if isinstance(x, (FloorDiv, ModularIndexing)):
            a, b = go(x.args[0]), go(x.args[1])
            q = div(a, b)
            if isinstance(x, FloorDiv):
                return q
            m = go(x.args[2])
            return q - div(q, m) * m if truncating else q % m
        if x.is_Symbol:
            return env[x]
        if x.is_Integer:
            return int(x)
        vals = [go(a) for a in x.args]
        return sum(vals) if x.is_Add else math.prod(vals)

    return go(e)


def test_a_dropped_multiple_never_leaves_a_negative_base() -> None:
    # Swin's patch merging after a channels-last convolution (a cat of 1::2 slices of a
    # transposed view) read (8*c + 2*j - 255) % 8 as (2*j - 255) % 8: right by floor
    # division, wrong by the kernels' truncating `%` (a NaN from out-of-bounds loads on
    # the H100, wrong values in C++). The constant now counts by its remainder.
    c, j = index_vars("i", 2)
    jj = ModularIndexing(j, 1, 4)
    assert ModularIndexing(1024 * c + 8 * c + 2 * jj - 255, 1, 8) == 2 * jj + 1
    assert ModularIndexing(16 * c + jj - 17, 4, 4) == ModularIndexing(jj + 15, 4, 4)
    # a rest with a term that may be negative keeps the whole base
    kept = ModularIndexing(16 * c - jj, 1, 16)
    assert isinstance(kept, ModularIndexing) and kept.args[0] == 16 * c - jj
    # and so does a division: a negative base is not "below the divisor"
    assert FloorDiv(jj - 5, 8) != 0
    assert simplify_index(ModularIndexing(c - 3, 1, 16), {c: 10}) != c - 3


def test_simplified_indices_print_the_value_they_stand_for() -> None:
    """Random sums of the forms views build (offsets of cat branches and slices included),
    divided and wrapped: wherever the original base is non-negative (the contract of
    FloorDiv and ModularIndexing), the simplified expression read with truncating `//`
    and `%` equals the original read with floor ones."""
    rng = random.Random(1)
    i, j, k = index_vars("i", 3)

    def atom() -> sympy.Expr:
        s = rng.choice([i, j, k])
        r = rng.random()
        if r < 0.3:
            return ModularIndexing(s, rng.choice([1, 2, 4]), rng.choice([4, 8, 16]))
        if r < 0.5:
            return FloorDiv(s, rng.choice([2, 4, 16]))
        return s

    for _ in range(400):
        base = sympy.Add(*[rng.choice([1, 2, 8, 16, 32, 128, 256, 1024]) * atom()
                           for _ in range(rng.randint(1, 4))], rng.randint(-300, 300))
        d, m = rng.choice([1, 2, 8, 16]), rng.choice([4, 8, 16, 64])
        bounds = {i: rng.choice([7, 63]), j: 15, k: 3}
        for fn, args in ((FloorDiv, (base, d)), (ModularIndexing, (base, d, m))):
            with sympy.evaluate(False):
                raw = fn(*args)  # as written, for its value
            got = simplify_index(fn(*args), bounds)
            for _ in range(20):
                env = {s: rng.randint(0, bounds[s]) for s in (i, j, k)}
                if _value(base, env, truncating=False) < 0:
                    continue
                want = _value(raw, env, truncating=False)
                assert _value(got, env, truncating=True) == want, (raw, got, env)
