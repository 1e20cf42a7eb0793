"""The C++ backend's build report: each kernel's machine code from `objdump -d`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from compiler.options import CompileOptions
from compiler.pipeline import run_pipeline

pytestmark = pytest.mark.skipif(shutil.which("objdump") is None, reason="no objdump")

CODE = """import torch


def f(x):
    return torch.relu(x * 2.0).sum(dim=1)


example_inputs = (torch.randn(64, 256),)
"""


def test_every_cpp_kernel_carries_its_own_assembly(tmp_path: Path) -> None:
    path = tmp_path / "snippet.py"
    path.write_text(CODE)
    events = list(run_pipeline(CODE, CompileOptions(profile=False), str(path)))
    assert events[-1].data["ok"], [e.data for e in events if e.stage == "error"]
    compiled = next(e.data for e in events if e.stage == "compile")
    kernels = compiled["graphs"][0]["kernels"]
    assert kernels
    for k in kernels:
        asm = k["ir"]["asm"]
        assert asm.startswith(tuple("0123456789abcdef")) and f"<{k['name']}>:" in asm
        assert "ret" in asm and "Disassembly of section" not in asm
        others = [o["name"] for o in kernels if o["name"] != k["name"]]
        assert not any(f"<{o}>:" in asm for o in others)
