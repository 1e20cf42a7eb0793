"""Kernel names are unique across the graphs of one trace: each graph's kernels are
numbered on from the graph before it (a graph break's two graphs, or a forward and its
backward, each had a `..._0`, and a name then pointed at two kernels)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ks_helpers import REPO

from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline

TRAINING = """import torch


def step(x, w):
    return torch.tanh(x @ w).sum()


x = torch.randn(16, 32)
w = torch.randn(32, 8, requires_grad=True)
loss = torch.compile(step)(x, w)
loss.backward()
"""


def _names(code: str, path: Path) -> list[list[str]]:
    path.write_text(code)
    events = list(run_pipeline(code, CompileOptions(device="cpu", backend="cpp",
                                                    profile=False), str(path)))
    assert events[-1].data["ok"], [e.data for e in events if e.stage == "error"]
    sched = next(e.data for e in events if e.stage == "scheduling")["graphs"]
    codegen = next(e.data for e in events if e.stage == "codegen")["graphs"]
    names = [[k["name"] for k in g["kernels"]] for g in codegen]
    for made, planned in zip(names, sched, strict=True):
        assert set(made) <= {k["name"] for k in planned["kernels"]}
    return names


BROKEN = """import torch


@torch.compile
def twice(x):
    y = torch.relu(x) + 1.0
    print("the graph breaks here")
    return torch.relu(y) + 1.0


twice(torch.randn(64))
"""


def test_a_graph_breaks_kernels_have_names_of_their_own(tmp_path: Path) -> None:
    names = _names(BROKEN, tmp_path / "broken.py")
    assert len(names) == 2 and all(names)
    flat = [n for g in names for n in g]
    assert len(flat) == len(set(flat)), names


def test_a_forward_and_its_backward_share_no_kernel_name(tmp_path: Path) -> None:
    names = _names(TRAINING, tmp_path / "training.py")
    assert len(names) == 2 and all(names)
    flat = [n for g in names for n in g]
    assert len(flat) == len(set(flat)), names


OWN_RUN = """import torch

x = torch.randn(64, requires_grad=True)


def twice(x):
    y = torch.relu(x) + 1.0
    print("the graph breaks here")
    return torch.relu(y) + 1.0


out = torch.compile(twice, backend="kernelscope", options={{"trace_dir": {d!r}}})(x)
out.sum().backward()
"""


def test_your_own_runs_graphs_share_no_kernel_name(tmp_path: Path) -> None:
    """A trace directory's graphs (your own run: `kernelscope run`, or options={"trace_dir":
    ...}) compile one at a time; each numbered its kernels from 0, so a graph break's two
    forwards and their backwards had one `..._0` each."""
    out = tmp_path / "trace"
    script = tmp_path / "mine.py"
    script.write_text(OWN_RUN.format(d=str(out)))
    proc = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(REPO),
                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
    assert sorted(r["kind"] for r in records) == ["backward"] * 2 + ["forward"] * 2
    names = [[k["name"] for k in r["stages"]["scheduling"]["kernels"]] for r in records]
    flat = [n for g in names for n in g]
    assert all(names) and len(flat) == len(set(flat)), names
    made = [k["name"] for r in records for k in r["stages"]["codegen"]["kernels"]]
    assert set(made) <= set(flat)
