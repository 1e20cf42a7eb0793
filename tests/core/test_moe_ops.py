"""A mixture of experts' router and dispatch ops, forward and backward, compiled against
eager (tests/core/moe_cases.py): C++ in-process, Triton under the interpreter in a
subprocess. What goes to ATen is what the compiler's events say, and is the table below:
an op that starts falling back fails here, one that stops must be taken off it.

Found by these cases: topk/sort of a value saved for backward picked other elements
(tests/core/test_compared_bits.py); under the interpreter a float32 -> bfloat16 cast
truncated where eager rounds to nearest even (the bf16 grouped_mm dispatch was 0.9 off).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ks_helpers import interpreter_case_results
from moe_cases import CASES, check

HERE = Path(__file__).resolve().parent

# Each case's ops that run on ATen, and why (the reasons the lowering event carries).
ATEN: dict[str, dict[str, int]] = {
    # one_hot checks its indices are in range: an assert ATen runs
    "one_hot_expert_mask": {"aten._assert_async.msg": 2},
    "nonzero_experts_hit": {"aten._assert_async.msg": 2},
    "where_tokens_of_expert": {"aten._assert_async.msg": 2},
    # (with AOTAutograd's min-cut partition the backward no longer repeats the forward's two)
    "looped_dispatch": {"aten._assert_async.msg": 2},
    # no lowering for histc
    "histc": {"aten.histc.default": 1},
    # integer ties: an unstable sort's order among equal values is eager's own
    "sort_expert_ids": {"aten.sort.default": 1},
    "sorted_dispatch_bf16": {"aten.histc.default": 1, "aten.sort.default": 1},
}


def _expected(name: str) -> str:
    return "ok fallbacks=" + ",".join(f"{op}x{n}" for op, n in ATEN.get(name, {}).items())


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpp_matches_eager_with_its_fallbacks(name: str) -> None:
    assert check(name, "cpp") == _expected(name)


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    return interpreter_case_results(HERE / "moe_cases.py", "triton")


@pytest.mark.parametrize("name", sorted(CASES))
def test_triton_interpreter_matches_eager_with_its_fallbacks(
        name: str, interpreter_results: dict[str, str]) -> None:
    assert interpreter_results.get(name) == _expected(name), interpreter_results.get(name)

