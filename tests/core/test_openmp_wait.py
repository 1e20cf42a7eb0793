"""OpenMP waits passively wherever our kernels run beside eager's ops: in every job (the
sandbox's environment), on the command line and in the tests (compiler/runtime/openmp.py).
Spinning teams made a 6-block training step's `run` stage 8-17 s instead of 0.2-0.6 s on a
loaded 2-core host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernelscope.compiler.runtime.openmp import wait_passively

REPO = Path(__file__).resolve().parents[2]
PROBE = """import os, sys
from kernelscope.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print(os.environ.get("OMP_WAIT_POLICY"), file=sys.stderr)
"""


def test_a_stated_policy_is_kept() -> None:
    env = {"OMP_WAIT_POLICY": "ACTIVE"}
    wait_passively(env)
    assert env == {"OMP_WAIT_POLICY": "ACTIVE"}
    empty: dict[str, str] = {}
    wait_passively(empty)
    assert empty == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_the_tests_wait_passively() -> None:
    assert os.environ.get("OMP_WAIT_POLICY") == "PASSIVE"


def test_the_command_line_waits_passively() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    probe = PROBE.format(argv=["compile", "--help"])
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, timeout=120, cwd=REPO, check=True)
    assert out.stderr.strip().splitlines()[-1] == "PASSIVE"
