"""Ops lowered natively (the ATen fallback off) give eager's answer: C++ in-process, the
Triton interpreter in a subprocess (TRITON_INTERPRET must be set before Triton is imported).
The cases live in native_cases.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from ks_helpers import interpreter_case_results
from native_cases import CASES, check_native

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpp_native(name: str) -> None:
    assert check_native(name, "cpp") == "ok"


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    return interpreter_case_results(HERE / "native_cases.py", "triton")


@pytest.mark.parametrize("name", sorted(CASES))
def test_triton_interpreter_native(name: str, interpreter_results: dict[str, str]) -> None:
    assert interpreter_results.get(name) == "ok", interpreter_results.get(name, "crashed")
