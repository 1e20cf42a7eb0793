"""Zero sizes, integer/bool semantics, NaNs, views, indexing, complex: eager's answers.

The cases live in correctness_cases.py; C++ runs them in-process, the Triton interpreter in
a subprocess (TRITON_INTERPRET must be set before Triton is imported).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from correctness_cases import CASES, NO_INTERPRETER, check
from ks_helpers import interpreter_case_results

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpp_matches_eager(name: str) -> None:
    assert check(name, "cpp") == "ok"


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    return interpreter_case_results(HERE / "correctness_cases.py", "triton")


@pytest.mark.parametrize("name", sorted(set(CASES) - NO_INTERPRETER))
def test_triton_interpreter_matches_eager(name: str, interpreter_results: dict[str, str]
                                          ) -> None:
    assert interpreter_results.get(name) == "ok", interpreter_results.get(name, "crashed")
