"""The CI tier of the all-dtype forward sweep: a fixed slice at f16, bf16, f64 and i32.

(f32, i64 and bool are the forward slice's, test_opinfo_slice.py.) Every case must give
eager's answer at the harness's per-dtype tolerances, and each op must be native at every
dtype it supports. The slice holds the ops the full dtype sweep found wrong (aminmax on
bool, signbit on bf16) beside common ones. The full sweep: `python tests/opinfo/sweep.py
--target cpp` (docs/coverage.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slice_support import assert_status, run_slice  # noqa: E402

NATIVE = """aminmax signbit add sum softmax cumsum where div.no_rounding_mode
nn.functional.layer_norm max.reduction_with_dim""".split()
DTYPES = "f16,bf16,f64,i32"


@pytest.fixture(scope="module")
def slice_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    return run_slice(tmp_path_factory.mktemp("opinfo-dtypes"), NATIVE, DTYPES, 1)


@pytest.mark.parametrize("op", NATIVE)
def test_dtype_slice_op(op: str, slice_results: dict[str, dict[str, object]]) -> None:
    assert_status(slice_results, op, "native")
