"""The C++ backend's build report: each kernel's machine code from `objdump -d`."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline

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


def test_each_cpp_kernels_assembly_maps_to_its_source_lines(tmp_path: Path) -> None:
    """Built with -g, the library's line table ties every instruction to a kernel line
    (compile.kernels[].line_maps.asm, docs/events.md): the loop body and the store line
    are reached, and nothing maps outside the kernel or the assembly."""
    path = tmp_path / "snippet.py"
    path.write_text(CODE)
    options = CompileOptions(profile=False, cache_dir=str(tmp_path / "cache"))
    events = list(run_pipeline(CODE, options, str(path)))
    assert events[-1].data["ok"], [e.data for e in events if e.stage == "error"]
    sources = {k["name"]: k["source"].splitlines()
               for g in next(e.data for e in events if e.stage == "codegen")["graphs"]
               for k in g["kernels"]}
    for k in next(e.data for e in events if e.stage == "compile")["graphs"][0]["kernels"]:
        source, asm = sources[k["name"]], k["ir"]["asm"].splitlines()
        spans = k["line_maps"]["asm"]
        assert spans and all(1 <= s["first"] <= s["last"] <= len(asm) for s in spans)
        reached = {n for s in spans for n in s["kernel_lines"]}
        assert reached <= set(range(1, len(source) + 1))
        loads = {i for i, t in enumerate(source, 1) if "in_ptr0[" in t}
        stores = {i for i, t in enumerate(source, 1) if "out_ptr0[" in t}
        # A load can be folded into the instruction that uses it (a memory operand of
        # the multiply: AVX-512 hosts do), which the line table gives the using line;
        # so the loop body from the load to the store is reached, and the store. The
        # store can go the other way, into the line of the value it stores (a double sum
        # cast to float: one `vcvtsd2ss` and its `vmovss` under the cast's line).
        stored = {re.search(r"= (tmp\d+);", source[i - 1]).group(1) for i in stores}
        stores |= {i for i, t in enumerate(source, 1)
                   if any(f"auto {v} = " in t for v in stored)}
        body = set(range(min(loads), max(stores) + 1))
        assert body & reached and stores & reached, (loads, stores, reached)
        assert not any(re.match(r"(inlined by |/\S+:\d+)", t) for t in asm)
