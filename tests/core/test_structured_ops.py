"""Scatter-like ops, scans, pools, max/min with indices: lowered natively and right.

The cases live in structured_cases.py; C++ runs them in-process, the Triton interpreter in
a subprocess (TRITON_INTERPRET must be set before Triton is imported, and an out-of-bounds
access would crash it).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from ks_helpers import run_case_script
from structured_cases import CASES, check

from compiler import backend

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpp_native_matches_eager(name: str) -> None:
    assert check(name, "cpp") == "ok"


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    return run_case_script(HERE / "structured_cases.py", "triton", {"TRITON_INTERPRET": "1"})


@pytest.mark.parametrize("name", sorted(CASES))
def test_triton_interpreter_native_matches_eager(name: str,
                                                 interpreter_results: dict[str, str]) -> None:
    assert interpreter_results.get(name) == "ok", interpreter_results.get(name, "crashed")


def _eager_reasons(fn, *args) -> list[str]:  # type: ignore[no-untyped-def]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, options={"backend": "cpp", "fallback": False})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled(*args)
    return [str(w.message) for w in caught if "kernelscope: running graph" in str(w.message)]


def test_empty_is_an_allocation() -> None:
    x = torch.randn(3, 5)
    assert _eager_reasons(lambda t: torch.empty_like(t).fill_(2.0) + t, x) == []


def test_long_scan_goes_to_aten_with_the_reason() -> None:
    """A scan whose dense form would cost too much is not lowered: ATen, and it says why."""
    reasons = _eager_reasons(lambda t: t.cumsum(0), torch.randn(8192))
    assert reasons and "dense form would cost 8192 outputs x 8192 candidates" in reasons[0]
    x = torch.randn(8192)
    torch._dynamo.reset()
    got = torch.compile(lambda t: t.cumsum(0), backend=backend, options={"backend": "cpp"})(x)
    torch.testing.assert_close(got, x.cumsum(0))
