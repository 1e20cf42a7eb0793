"""Every logsumexp step of the Triton codegen (triton_rules.LSE_STEPS) computes eager's
softmax, log_softmax and cross_entropy over long rows with NaN, +inf, all -inf, one
finite value, rising and falling rows: the rule that picks one is about speed only.
Under the Triton interpreter, in a process of its own (TRITON_INTERPRET must be set
before Triton is imported); also the default rule over a grid of more rows than
triton_rules.FEW_ROWS (which takes the other step)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ks_helpers import REPO

HERE = Path(__file__).resolve().parent

CHILD = r"""
import sys
import torch
import torch.nn.functional as F
from correctness_cases import _monotone, _special, compare
from kernelscope.compiler import backend
from kernelscope.compiler.codegen.triton import rules

FNS = {"softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: torch.log_softmax(x, -1),
       "cross_entropy": lambda x: F.cross_entropy(x, torch.arange(x.shape[0]) * 7 % x.shape[1])}

def run(tag, inputs):
    for name, fn in FNS.items():
        torch._dynamo.reset()
        got = torch.compile(fn, backend=backend, options={"backend": "triton"})(*inputs)
        print(f"{tag}/{name} {compare(got, fn(*inputs))}", flush=True)

torch.manual_seed(0)
special, monotone = (_special(16, 5000),), _monotone()
for step in rules.LSE_STEPS:
    rules.LSE_STEP = rules.LSE_STEP_FEW_ROWS = step
    run(f"{step}/special", special)
    run(f"{step}/monotone", monotone)
"""

MANY = r"""
import torch
from correctness_cases import _special, compare
from kernelscope.compiler import backend
from kernelscope.compiler.codegen.triton import rules

torch.manual_seed(0)
x = _special(rules.FEW_ROWS + 40, 4500)
fn = lambda x: torch.log_softmax(x, -1)
got = torch.compile(fn, backend=backend, options={"backend": "triton"})(x)
print("many_rows", compare(got, fn(x)))
"""


def _run(code: str) -> dict[str, str]:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], cwd=HERE, env=env, text=True,
                          capture_output=True, timeout=900)
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert out, proc.stderr[-3000:]
    return out


def test_every_lse_step_matches_eager() -> None:
    from kernelscope.compiler.codegen.triton import rules

    out = _run(CHILD)
    expected = {f"{s}/{i}/{f}" for s in rules.LSE_STEPS for i in ("special", "monotone")
                for f in ("softmax", "log_softmax", "cross_entropy")}
    assert set(out) == expected
    assert {k: v for k, v in out.items() if v != "ok"} == {}


def test_many_rows_take_the_default_step_and_match_eager() -> None:
    assert _run(MANY) == {"many_rows": "ok"}
