"""The CI tier of the OpInfo sweep: a fixed slice of op_db on the C++ backend.

Every case must give eager's answer (no mismatch, no error), and each op must keep the
status it has today: `native` ops lowered with the ATen fallback off, `fallback` ops right
through ATen. The full sweep is `python tests/opinfo/sweep.py` (docs/coverage.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from slice_support import assert_status, run_slice  # noqa: E402

NATIVE = """add sub mul div.no_rounding_mode div.floor_rounding div.trunc_rounding remainder fmod
exp log sqrt rsqrt sigmoid tanh abs neg clamp where maximum logical_xor logical_not
bitwise_not sum mean amax amin argmax argmin var std softmax log_softmax nn.functional.gelu
nn.functional.layer_norm cat split chunk unbind diagonal roll flip index_select gather
masked_fill pow round.decimals_3 log10 hypot signbit __getitem__ cumsum max.reduction_with_dim
nn.functional.max_pool2d nn.functional.adaptive_avg_pool2d slice_scatter diagonal_scatter repeat
index_copy index_put masked_scatter linalg.vector_norm""".split()
# No lowering: right through ATen. (round.decimals_3 was here until its lowering.)
FALLBACK = ["linalg.det"]
DTYPES = "f32,i64,bool"


@pytest.fixture(scope="module")
def slice_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    return run_slice(tmp_path_factory.mktemp("opinfo"), NATIVE + FALLBACK, DTYPES, 2)


@pytest.mark.parametrize("op", NATIVE + FALLBACK)
def test_slice_op(op: str, slice_results: dict[str, dict[str, object]]) -> None:
    assert_status(slice_results, op, "native" if op in NATIVE else "fallback")
