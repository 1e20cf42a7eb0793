"""A kernel whose buffers nothing reads is not generated (the scheduler drops the group).

The backward of as_strided_scatter lowers a zeros buffer that only a view reads, and that
view is returned as a reinterpretation of the incoming gradient: the group stored nothing
and was emitted as a Triton launch with no arguments, a SyntaxError in the wrapper (the
CUDA gradient sweep's two errors, as_strided_scatter and as_strided_copy). Run under the
Triton interpreter in a process of its own (TRITON_INTERPRET is read at import)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys, torch
CACHE = sys.argv[1]
from kernelscope.compiler import backend

def f(x, src):
    return torch.as_strided_scatter(x, src, (2, 2), (1, 2), 1) * 3

def grads(fn):
    torch.manual_seed(0)
    x = torch.randn(5, 5, requires_grad=True)
    s = torch.randn(2, 2, requires_grad=True)
    out = fn(x, s)
    (out * torch.arange(25.0).view(5, 5)).sum().backward()
    return out.detach(), x.grad, s.grad

compiled = torch.compile(f, backend=backend, options={"backend": "triton", "cache_dir": CACHE})
for got, want in zip(grads(compiled), grads(f)):
    torch.testing.assert_close(got, want)
print("ok")
"""


def test_as_strided_scatter_backward_on_triton(tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
