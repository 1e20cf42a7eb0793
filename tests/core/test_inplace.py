"""A mutated input's new value written over the input by its kernel (Triton backend,
schedule/inplace.py): the Adam update moved 52 bytes per element instead of 28 on the
H200 while AOTAutograd copied every new value back. Cases in inplace_cases.py, run under
the Triton interpreter in a subprocess (TRITON_INTERPRET must be set before import)."""

from __future__ import annotations

from pathlib import Path

import pytest
from inplace_cases import CASES
from ks_helpers import interpreter_case_results

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    return interpreter_case_results(HERE / "inplace_cases.py", timeout=600)


@pytest.mark.parametrize("name", sorted(CASES))
def test_mutated_inputs_match_eager(name: str, results: dict[str, str]) -> None:
    assert results.get(name) == "ok", results.get(name, "crashed")
