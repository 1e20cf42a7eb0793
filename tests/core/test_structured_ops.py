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
from ks_helpers import interpreter_case_results
from structured_cases import CASES, check

from kernelscope.compiler import backend

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpp_native_matches_eager(name: str) -> None:
    assert check(name, "cpp") == "ok"


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    return interpreter_case_results(HERE / "structured_cases.py", "triton")


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


@pytest.mark.parametrize("fn, make, reason", [
    (lambda x: torch.topk(x, 2), lambda: (torch.tensor([1, 3, 3, 0, 3]),), "integer ties"),
    (lambda x: torch.sort(x), lambda: (torch.tensor([1, 3, 3, 0, 3]),), "integer ties"),
    (lambda x, i, s: x.scatter_add(0, i, s),
     lambda: (torch.tensor([True, False]), torch.tensor([0, 0]), torch.tensor([True, True])),
     "sum of bool values"),
    (lambda x: torch.cummax(x, 0), lambda: (torch.tensor([False, True, False]),),
     "running max/min of bool values"),
])
def test_unlowered_cases_go_to_aten_with_the_reason(fn, make, reason) -> None:  # type: ignore[no-untyped-def]
    """What the dense forms do not do is ATen's, with the reason, and still eager's answer
    (integer ties in topk/sort raised a mismatch, bool scatter_add/cummax a TypeError)."""
    args = make()
    reasons = _eager_reasons(fn, *args)
    assert reasons and reason in reasons[0]
    torch._dynamo.reset()
    got = torch.compile(fn, backend=backend, options={"backend": "cpp"})(*args)
    expected = fn(*args)
    for g, e in zip(got if isinstance(got, tuple) else (got,),
                    expected if isinstance(expected, tuple) else (expected,)):
        assert torch.equal(g, e)
