"""A graph's compiled module is never shared with a graph of other input dtypes.

A wrapper's text is its module's cache key, and Triton specializes a compiled kernel on the
dtype its pointers point to, which the kernel's text need not say: `atan` of int32 and of
int64 generate the same Triton kernel (`tl.load(...).to(tl.float32)`). Both graphs got one
module, and on a GPU the second ran the first's compiled kernel on its own data (the CUDA
all-dtype OpInfo sweep: 126 mismatches, every one a dtype swept after another of the same
op). The wrapper's first line now names its inputs' dtypes, so the keys differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from ks_helpers import compiled

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys, torch
from kernelscope.compiler import backend
outs = []
for dtype in (torch.int32, torch.int64, torch.float16, torch.float64):
    torch._dynamo.reset()
    x = (torch.arange(-12, 12) * 7).to(dtype)
    f = torch.compile(lambda t: torch.atan(t), backend=backend, options={"backend": "triton"})
    assert torch.equal(f(x), torch.atan(x)), dtype
modules = sorted(m for m in sys.modules if m.startswith("kernelscope_graph_"))
print(len(modules))
"""


def test_graphs_of_other_input_dtypes_load_other_modules(tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO),
           "KERNELSCOPE_CACHE": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[-1] == "4"


def test_the_wrapper_names_its_input_dtypes(tmp_path: Path) -> None:
    f = compiled(lambda a, b: a + b.float(), backend="cpp", trace_dir=str(tmp_path))
    f(torch.ones(3), torch.ones(3, dtype=torch.int64))
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    wrapper = record["stages"]["codegen"]["wrapper"]["source"]
    head, _, dtypes = wrapper.splitlines()[0].partition("; inputs ")
    assert head.startswith("# Kernelscope wrapper (cpp)"), wrapper
    assert sorted(dtypes.split(", ")) == ["float32", "int64"], wrapper
