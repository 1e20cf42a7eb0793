"""Ops lowered natively (the ATen fallback off) give eager's answer: C++ in-process, the
Triton interpreter in a subprocess (TRITON_INTERPRET must be set before Triton is imported).
The cases live in native_cases.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from native_cases import CASES, check_native

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpp_native(name: str) -> None:
    assert check_native(name, "cpp") == "ok"


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(HERE / "native_cases.py"), "triton"],
                          capture_output=True, text=True, env=env, timeout=900)
    results = {}
    for line in proc.stdout.splitlines():
        name, _, result = line.partition(" ")
        results[name] = result
    assert results, proc.stderr[-3000:]
    return results


@pytest.mark.parametrize("name", sorted(CASES))
def test_triton_interpreter_native(name: str, interpreter_results: dict[str, str]) -> None:
    assert interpreter_results.get(name) == "ok", interpreter_results.get(name, "crashed")
