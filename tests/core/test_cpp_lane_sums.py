"""Accurate C++ float sums.

The chunked second loop over a short row (softmax's exp-sum, layer norm's variance) keeps
its accumulators in 16 lanes across the chunks and combines them pairwise after the row
(codegen/cpp/prefetch.py). Before, an `omp simd` reduction per 128-element chunk added its
lanes one by one into the row's total: softmax over rows of 1024 was 2.4x as far from
float64 as eager (1.9e-7 against 7.7e-8). Column sums: codegen/cpp/columns.py."""

from __future__ import annotations

import pytest
import torch

from kernelscope.compiler import backend


def _compiled(fn):  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend)


def _cpp_source(fn, *args) -> str:  # type: ignore[no-untyped-def]
    from test_golden import generated  # kernels and wrapper, as the golden files hold them

    return str(generated(fn, args, "cpp")).split("def call")[0]


def _rel(got: torch.Tensor, exact: torch.Tensor) -> float:
    return float((got.double() - exact).norm() / exact.norm())


def test_softmax_rows_as_accurate_as_eager() -> None:
    """Against float64: within 1.5x eager's own error (2.4x before the lanes)."""
    torch.manual_seed(0)
    x = torch.randn(512, 1024)
    exact = torch.softmax(x.double(), -1)
    got = _compiled(lambda t: torch.softmax(t, -1))(x)
    eager = _rel(torch.softmax(x, -1), exact)
    assert _rel(got, exact) < 1.5 * eager


def test_sum_lives_in_lanes_across_chunks() -> None:
    src = _cpp_source(lambda t: torch.softmax(t, -1), torch.randn(8, 1024))
    assert "float acc_tmp5_l[16];" in src
    assert "float& acc_tmp5 = acc_tmp5_l[rindex - rv];" in src
    assert "for (int64_t rindex = rv; rindex < rv + 16; rindex++)" in src
    # no reduction clause inside the chunks: one combine per row, pairwise
    assert src.count("reduction(") == 1  # the max loop's
    assert "for (int64_t w = 8; w > 0; w /= 2) for (int64_t l = 0; l < w; l++) " \
        "acc_tmp5_l[l] = acc_tmp5_l[l] + acc_tmp5_l[l + w];" in src


@pytest.mark.parametrize("n", [700, 1000, 33])
def test_rows_not_a_multiple_of_the_lanes(n: int) -> None:
    """The last group of a row is short: it stops at the row's end."""
    torch.manual_seed(n)
    x = torch.randn(40, n)
    norm = lambda t: (t - t.mean(-1, keepdim=True)).pow(2).mean(-1)  # noqa: E731
    if n % 16:
        assert "std::min<int64_t>(rv + 16, rend)" in _cpp_source(norm, x)
    torch.testing.assert_close(_compiled(norm)(x), norm(x))
    torch.testing.assert_close(_compiled(lambda t: torch.softmax(t, -1))(x), x.softmax(-1))


def test_max_in_lanes_keeps_nan() -> None:
    """A max in the chunked loop: lanes combine with the same NaN rule as the loop."""
    torch.manual_seed(3)
    x = torch.randn(64, 512)
    x[5, 301] = float("nan")
    fn = lambda t: (t - t.mean(-1, keepdim=True)).abs().amax(-1)  # noqa: E731
    assert "_l[16];" in _cpp_source(fn, x)
    got = _compiled(fn)(x)
    torch.testing.assert_close(got, fn(x), equal_nan=True)
    assert got[5].isnan() and not got[4].isnan()


def test_column_sums_as_accurate_as_eager() -> None:
    """`x.sum(0)` over 2048 rows: each output added its rows in turn into one float, 7x
    as far from float64 as eager's cascade sum (8.5e-7 against 1.2e-7). Rows now go in
    blocks of COLUMN_SUM_ROWS into float lanes, each block's partial into a double."""
    from kernelscope.compiler.codegen.cpp.columns import COLUMN_SUM_ROWS

    torch.manual_seed(0)
    x = torch.randn(2048, 256)
    exact = x.double().sum(0)
    src = _cpp_source(lambda t: t.sum(0), x)
    assert f"rblock += {COLUMN_SUM_ROWS})" in src and "double* acc_tmp1_t = " in src
    assert "// rows in 16 parts of 128" in src  # 2048 rows: split by rows (row_parts)
    got = _compiled(lambda t: t.sum(0))(x)
    assert _rel(got, exact) < 1.2 * _rel(x.sum(0), exact)


def test_columns_longer_than_a_chunk_are_still_walked_by_rows() -> None:
    """x.sum(0) over more than SUM_CHUNK rows was a chunked sum per output, down its
    strided column (16384 x 768: 142 ms against eager's 3.3 on one thread); it is the
    column walk, by row parts when it is sums only, by blocks of outputs beside a product."""
    from kernelscope.compiler.codegen.cpp.kernel import SUM_CHUNK

    torch.manual_seed(4)
    x = torch.randn(SUM_CHUNK + 1000, 40)
    both = lambda t: (t.sum(0), (1 + t * 1e-3).prod(0))  # noqa: E731
    split, blocks = _cpp_source(lambda t: t.sum(0), x), _cpp_source(both, x)
    assert "// rows in 40 parts of 128" in split and "rchunk" not in split, split
    assert "for (int64_t xblock = 0; xblock < 40; xblock += xb)" in blocks, blocks
    assert "double acc_tmp1_total = acc_tmp1_t[xindex - xblock];" in blocks, blocks
    exact = x.double().sum(0)
    got_sum = _compiled(lambda t: t.sum(0))(x)
    got_both = _compiled(both)(x)
    for got in (got_sum, got_both[0]):
        assert got.dtype == torch.float32 and got.shape == (40,)
        assert _rel(got, exact) < 1.2 * _rel(x.sum(0), exact)
    torch.testing.assert_close(got_both[1], both(x)[1], rtol=1e-5, atol=1e-6)


def test_a_max_with_its_nan_fix_up_walks_columns() -> None:
    """amax(0) is a loop and a per-output epilogue (NaN where a column held one): the
    epilogue runs after the walk's per-output lines; it was a strided walk per output
    (2048x1024: 20x eager's time), then a walk g++ did not vectorize (bool flags)."""
    torch.manual_seed(5)
    x = torch.randn(3000, 40)
    x[17, 3] = float("nan")
    src = _cpp_source(lambda t: t.amax(0), x)
    assert "ks_column_block(40, 40)" in src and "quiet_NaN() : tmp1;" in src, src
    assert "int32_t acc_tmp3_v[40];" in src, src  # the NaN flags in float-wide lanes
    got = _compiled(lambda t: t.amax(0))(x)
    assert got.shape == (40,) and got.dtype == torch.float32
    torch.testing.assert_close(got, x.amax(0), equal_nan=True, rtol=0, atol=0)
    assert got[3].isnan()


@pytest.mark.parametrize("rows", [7, 32, 33, 1000])
def test_column_row_blocks_of_any_length(rows: int) -> None:
    """Columns shorter than a block keep one float per output; a last short block ends at
    the last row; a max beside the sum keeps its one array."""
    torch.manual_seed(rows)
    x = torch.randn(rows, 48)
    fn = lambda t: (t.sum(0), t.amax(0), (t * t).mean(0))  # noqa: E731
    assert ("rblock" in _cpp_source(lambda t: t.sum(0), x)) == (rows > 32)
    for g, r in zip(_compiled(fn)(x), fn(x)):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 48, 32, 32), (4, 8, 64, 64)])
def test_batch_norm_statistics_add_in_double(shape: tuple[int, ...]) -> None:
    """A float sum in a loop over the row adds in double, as eager's CPU batch norm does
    (WIDE_SUM). The zoo's MobileNetV2 found it: its expand layers' inputs have channel means
    of ~1e-9 in values of ~0.03, 8 float lanes got those means 35% wrong (2048 elements,
    the plain loop) where eager's are exact, and one activation near a ReLU6 kink went the
    other way: 122 of 317 tensors past the training rule on an AVX2 host. 4096 elements
    and more: the chunked loop, whose chunks add in double too."""
    from kernelscope.compiler.codegen.cpp.kernel import SUM_CHUNK, WIDE_SUM

    torch.manual_seed(0)
    x = torch.randn(shape) * 0.03
    x = x - x.mean(dim=(0, 2, 3), keepdim=True)  # channel means left at rounding noise
    fn = lambda t: torch.var_mean(t, dim=(0, 2, 3), correction=0)  # noqa: E731
    src = _cpp_source(fn, x)
    assert f"{WIDE_SUM} acc_tmp" in src, src
    assert ("rchunk" in src) == (x.numel() // x.shape[1] > SUM_CHUNK), src
    var, mean = _compiled(fn)(x)
    assert var.dtype == mean.dtype == torch.float32 and mean.shape == (shape[1],)
    exact = x.double().mean(dim=(0, 2, 3))
    # the only error left: rounding the double sum to float (and the exact 1/n)
    assert ((mean.double() - exact).abs() <= 2 * torch.finfo(torch.float32).eps *
            exact.abs()).all(), (mean.double() - exact).abs().max()
    exact_var = x.double().var(dim=(0, 2, 3), correction=0)
    assert _rel(var, exact_var) < 1e-6
