"""Convolutions fed channels-last (lowering/conv.py: cuDNN transposed NCHW to NHWC and
back around every convolution, 120 of 330 us of the ResNet basic block on the H200) and
pointwise kernels that walk the NHWC buffer they store in memory order. The cases, in
layout_cases.py, run under the Triton interpreter in a subprocess (TRITON_INTERPRET must
be set before Triton is imported), with the CUDA check switched off."""

from __future__ import annotations

from pathlib import Path

import pytest
from ks_helpers import interpreter_case_results
from layout_cases import CASES

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    return interpreter_case_results(HERE / "layout_cases.py", timeout=600)


@pytest.mark.parametrize("name", [*sorted(CASES), "plan"])
def test_channels_last_convolutions_match_eager(name: str, results: dict[str, str]) -> None:
    assert results.get(name) == "ok", results.get(name, "crashed")
