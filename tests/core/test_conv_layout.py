"""Convolutions fed channels-last (lowering/conv.py: cuDNN transposed NCHW to NHWC and
back around every convolution, 120 of 330 us of the ResNet basic block on the H200) and
pointwise kernels that walk the NHWC buffer they store in memory order. The cases, in
layout_cases.py, run under the Triton interpreter in a subprocess (TRITON_INTERPRET must
be set before Triton is imported), with the CUDA check switched off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from layout_cases import CASES

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(HERE / "layout_cases.py")],
                          capture_output=True, text=True, env=env, timeout=600)
    out = {}
    for line in proc.stdout.splitlines():
        name, _, result = line.partition(" ")
        out[name] = result
    assert out, proc.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", [*sorted(CASES), "plan"])
def test_channels_last_convolutions_match_eager(name: str, results: dict[str, str]) -> None:
    assert results.get(name) == "ok", results.get(name, "crashed")
