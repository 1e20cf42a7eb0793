"""Triton's own frontend (triton.compile for sm_90, offline) accepts every kernel of the
cases the interpreter ran but a GPU's first launch refused (frontend_cases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from frontend_cases import FRONTEND_CASES
from ks_helpers import run_case_script

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def frontend_results() -> dict[str, str]:
    # The kernels must be JIT functions: no TRITON_INTERPRET in that process.
    return run_case_script(HERE / "triton_frontend.py", env_extra={"TRITON_INTERPRET": "0"})


@pytest.mark.parametrize("name", sorted(FRONTEND_CASES))
def test_triton_frontend_compiles(name: str, frontend_results: dict[str, str]) -> None:
    assert frontend_results.get(name) == "ok", frontend_results.get(name, "crashed")
