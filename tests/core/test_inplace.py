"""A mutated input's new value written over the input by its kernel (Triton backend,
schedule/inplace.py): the Adam update moved 52 bytes per element instead of 28 on the
H200 while AOTAutograd copied every new value back. Cases in inplace_cases.py, run under
the Triton interpreter in a subprocess (TRITON_INTERPRET must be set before import)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from inplace_cases import CASES

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(HERE / "inplace_cases.py")],
                          capture_output=True, text=True, env=env, timeout=600)
    out = {}
    for line in proc.stdout.splitlines():
        name, _, result = line.partition(" ")
        out[name] = result
    assert out, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_mutated_inputs_match_eager(name: str, results: dict[str, str]) -> None:
    assert results.get(name) == "ok", results.get(name, "crashed")
