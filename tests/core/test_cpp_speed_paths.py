"""The C++ backend's fast paths compute what eager computes: vectorized libm calls,
chunked float sums (accurate over millions of elements), interchanged column reductions."""

from __future__ import annotations

import math

import pytest
import torch

from kernelscope.compiler import backend


def _compiled(fn):  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend)


def test_long_float_sum_is_accurate() -> None:
    """A single sequential float accumulator misses by ~1e-2 here; eager is ~1e-7."""
    torch.manual_seed(0)
    x = torch.randn(1 << 24)
    got = _compiled(lambda t: (t * t).sum())(x)
    exact = (x.double() * x.double()).sum()
    assert got.dtype == torch.float32 and got.shape == ()
    assert abs(got.double() - exact) / exact < 1e-5


@pytest.mark.parametrize("rows", [1, 5000, 4096 * 3 + 7])
def test_chunked_row_sums_match_eager(rows: int) -> None:
    torch.manual_seed(1)
    x = torch.randn(3, rows)
    torch.testing.assert_close(_compiled(lambda t: t.sum(-1))(x), x.sum(-1),
                               rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(_compiled(lambda t: t.mean(-1) + t.amax(-1))(x),
                               x.mean(-1) + x.amax(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(64, 32), (300, 1000)])
def test_column_reductions_match_eager(shape: tuple[int, int]) -> None:
    torch.manual_seed(2)
    x = torch.randn(*shape)
    for fn in (lambda t: t.sum(0), lambda t: (t.amax(0, keepdim=True), (t * t).sum(0) + 1)):
        got, ref = _compiled(fn)(x), fn(x)
        for g, r in zip(got if isinstance(got, tuple) else (got,),
                        ref if isinstance(ref, tuple) else (ref,)):
            assert g.shape == r.shape and g.dtype == r.dtype
            torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-4)


def test_column_blocks_follow_the_threads_and_change_no_result() -> None:
    """The block of outputs is sized at run time (one per thread, at most COLUMN_BLOCK):
    each output still adds its rows in order, so one thread and two give the same bits."""
    from kernelscope.compiler.codegen.cpp.columns import COLUMN_BLOCK

    torch.manual_seed(10)
    x = torch.randn(60, 2 * COLUMN_BLOCK + 904)
    fn = _compiled(lambda t: t.sum(0))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = fn(x)
        torch.set_num_threads(2)
        two = fn(x)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, two) and one.shape == (x.shape[1],)
    torch.testing.assert_close(one, x.sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [(2048, 1024), (1000, 3000), (9000, 96)])
def test_row_split_column_sums_are_one_result_on_any_thread_count(
        shape: tuple[int, int]) -> None:
    """Sums over many rows split the rows in parts fixed by the shape (codegen/cpp/columns.py
    row_parts): 1, 2 and 3 threads give the same bits, as close to float64 as eager. Shapes:
    whole parts, a last part of 104 rows with 3000 outputs (two blocks of outputs), and 64
    parts of 160 rows (the cap on parts); a fused producer (gelu's backward) and bf16 too."""
    from kernelscope.compiler.codegen.cpp.columns import MAX_ROW_PARTS, ROW_PART

    assert shape[0] >= 2 * ROW_PART and shape[0] // MAX_ROW_PARTS <= 160
    torch.manual_seed(11)
    x, y = torch.randn(*shape), torch.randn(*shape)

    def grads(t: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, ...]:
        g = u * torch.ops.aten.gelu_backward(torch.ones_like(t), t)
        return t.sum(0), g.sum(0), t.bfloat16().sum(0)

    fn = _compiled(grads)
    threads = torch.get_num_threads()
    runs = []
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            runs.append(fn(x, y))
    finally:
        torch.set_num_threads(threads)
    for other in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0], other))
    wide = grads(x.double(), y.double())
    eager = grads(x, y)
    for got, ref in zip(runs[0], eager):
        assert got.shape == ref.shape == (shape[1],) and got.dtype == ref.dtype
    # The plain sum as close to float64 as eager's; the fused producer's own rounding (a
    # vectorized erf) and bf16 at their tolerances against eager.
    err = (runs[0][0].double() - wide[0]).abs().max().item()
    assert err <= 2 * max((eager[0].double() - wide[0]).abs().max().item(), 1e-6), err
    torch.testing.assert_close(runs[0][1], eager[1], rtol=1e-5, atol=2e-4)
    torch.testing.assert_close(runs[0][2], eager[2], rtol=1.6e-2, atol=1e-1)


OPS = ["exp", "log1p", "sin", "cos", "tanh", "erf", "expm1", "sigmoid", "atan"]


def test_vector_math_matches_eager() -> None:
    """Every op in one graph (one build); specials too: +-0, +-inf, NaN."""
    torch.manual_seed(3)
    x = torch.randn(70_000) * 3
    x[:5] = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan])

    def fn(t: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(getattr(torch, op)(t) for op in OPS)

    for op, got, ref in zip(OPS, _compiled(fn)(x), fn(x)):
        torch.testing.assert_close(got, ref, rtol=2e-6, atol=2e-6, equal_nan=True,
                                   msg=lambda m, op=op: f"{op}: {m}")


def test_vector_math_is_declared_for_glibc() -> None:
    from kernelscope.compiler.codegen.cpp.kernel import PRELUDE

    assert 'simd("notinbranch")' in PRELUDE and "KS_SIMD1(tanhf)" in PRELUDE


def _cpp_source(fn, *args):  # type: ignore[no-untyped-def]
    from test_golden import generated  # kernels and wrapper, as the golden files hold them

    return generated(fn, args, "cpp")


@pytest.mark.parametrize("shape", [(64, 1024), (3, 5, 40), (7, 17)])
def test_broadcast_pointwise_loops_over_rows(shape: tuple[int, ...]) -> None:
    """`x + b` with b broadcast along rows: rows outside, an `omp simd` loop along each row
    inside, and no `%` in any index (a flat loop needs `xindex % n` for b, which g++
    does not vectorize)."""
    torch.manual_seed(4)
    x, b = torch.randn(*shape), torch.randn(shape[-1])
    fn = lambda t, u: (t + u).relu()  # noqa: E731
    src = _cpp_source(fn, x, b)
    assert "yindex" in src and "%" not in src.split("def call")[0]
    torch.testing.assert_close(_compiled(fn)(x, b), fn(x, b))


def test_short_rows_stay_one_flat_loop() -> None:
    x, b = torch.randn(100, 3), torch.randn(3)
    src = _cpp_source(lambda t, u: t * u, x, b)
    assert "yindex" not in src
    torch.testing.assert_close(_compiled(lambda t, u: t * u)(x, b), x * b)


def test_max_with_nan_check_is_simd_and_keeps_nan() -> None:
    """amax's NaN check (an any) has its own `omp simd` clause, and a NaN anywhere in a row
    (any lane) still makes that row's max and softmax NaN."""
    x = torch.randn(40, 1000)
    for row, col in enumerate([0, 1, 7, 8, 15, 16, 999]):
        x[row, col] = math.nan
    x[10] = -math.inf
    fn = lambda t: (t.amax(-1), torch.softmax(t, -1))  # noqa: E731
    assert "reduction(||:" in _cpp_source(fn, x)
    for got, ref in zip(_compiled(fn)(x), fn(x)):
        torch.testing.assert_close(got, ref, equal_nan=True)


@pytest.mark.parametrize("n", [1000, 8192])
def test_softmax_keeps_exp_for_the_last_loop(n: int) -> None:
    """The sum's loop keeps exp(x - max) where the last loop stores its result (a float32
    output holds it exactly); the last loop reads it there instead of calling exp again,
    and multiplies by 1/sum as eager's CPU kernel does. Rows with -inf, NaN and a large
    value stay eager's."""
    torch.manual_seed(5)
    x = torch.randn(6, n) * 10
    x[1, 3], x[2] = math.nan, -math.inf
    x[3, 5] = 1e30
    fn = lambda t: torch.softmax(t, -1)  # noqa: E731
    src = _cpp_source(fn, x).split("def call")[0]
    assert src.count("std::exp(") == 1 and "row_" not in src
    assert f"out_ptr0[{n}*xindex + rindex] = tmp4;" in src and "= 1 / " in src
    torch.testing.assert_close(_compiled(fn)(x), fn(x), equal_nan=True)


def test_bf16_softmax_keeps_exp_in_a_float_row() -> None:
    """A bfloat16 output would round the kept float: it stays in a float row array."""
    torch.manual_seed(7)
    x = torch.randn(8, 1000, dtype=torch.bfloat16) * 4
    fn = lambda t: torch.softmax(t, -1)  # noqa: E731
    src = _cpp_source(fn, x).split("def call")[0]
    assert src.count("std::exp(") == 1 and "float row_" in src
    got = _compiled(fn)(x)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), fn(x.float()), rtol=1.6e-2, atol=1e-2)


def test_two_kept_values_do_not_share_the_output_element() -> None:
    """exp and cos are both kept for the last loop: one waits in the output, the other
    in a row array (one output element holds one value)."""
    torch.manual_seed(8)
    x = torch.randn(16, 512)

    def fn(t: torch.Tensor) -> torch.Tensor:
        p = torch.exp(t - t.amax(-1, keepdim=True)) * torch.cos(t)
        return p / p.sum(-1, keepdim=True)

    src = _cpp_source(fn, x).split("def call")[0]
    assert src.count("std::exp(") == 1 and src.count("std::cos(") == 1
    assert src.count("row_") >= 2  # declared and written once, read once
    torch.testing.assert_close(_compiled(fn)(x), fn(x))


def test_long_rows_compute_exp_twice() -> None:
    """Past ROW_KEEP_MAX a row array would not fit the stack: exp is computed again."""
    from kernelscope.compiler.codegen.cpp.kernel import ROW_KEEP_MAX

    x = torch.randn(2, ROW_KEEP_MAX + 8)
    src = _cpp_source(lambda t: torch.softmax(t, -1), x).split("def call")[0]
    assert src.count("std::exp(") == 2 and "row_" not in src
    torch.testing.assert_close(_compiled(lambda t: torch.softmax(t, -1))(x), x.softmax(-1))


def test_next_row_prefetch_only_where_rows_are_read_again() -> None:
    """Short rows read by several loops (a mean, then the centred row) run their second
    loop in chunks, each after a prefetch of the next row's lines: what the first loop
    reads, and the output for writing. A one-loop row sum and rows past PREFETCH_ROW_MAX
    are left alone; the last row prefetches nothing; a row that is not a multiple of the
    chunk ends in a short chunk."""
    from kernelscope.compiler.codegen.cpp.prefetch import PREFETCH_CHUNK, PREFETCH_ROW_MAX

    torch.manual_seed(9)
    norm = lambda t: (t - t.mean(-1, keepdim=True)) * 2  # noqa: E731
    x = torch.randn(33, 700)
    src = _cpp_source(norm, x).split("def call")[0]
    assert f"for (int64_t rchunk = 0; rchunk < 700; rchunk += {PREFETCH_CHUNK})" in src
    assert "if (xindex + 1 < 33) for (int64_t rp = rchunk; rp < rend; rp += 16) " \
        "__builtin_prefetch(&in_ptr0[700*xindex + rp + 700]);" in src
    assert "__builtin_prefetch(&out_ptr0[700*xindex + rp + 700], 1);" in src
    torch.testing.assert_close(_compiled(norm)(x), norm(x))
    assert "__builtin_prefetch" not in _cpp_source(lambda t: t.sum(-1), x)
    long_rows = torch.randn(3, PREFETCH_ROW_MAX // 4 + 16)
    assert "__builtin_prefetch" not in _cpp_source(norm, long_rows)
    torch.testing.assert_close(_compiled(norm)(long_rows), norm(long_rows))
