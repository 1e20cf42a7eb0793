"""Golden generated code: the shape of the kernels is the point here.

Set KERNELSCOPE_UPDATE_GOLDEN=1 to (re)write the files after an intended change (and read
the diff: a refactor should leave them byte-identical). Without it a missing golden file
is a failure, never a file written and a pass.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import golden_fns
import pytest
import torch
from golden_fns import _add_relu, _softmax, _transposed_add
from ks_helpers import lower_fn

from kernelscope.compiler.compile_fx import (
    codegen_stage,
    lower,
    memory_stage,
    schedule_stage,
)
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.options import CompileOptions

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


CASES: dict[str, tuple[Callable[..., Any], tuple[Any, ...], str]] = {
    "add_relu_cpp": (_add_relu, (torch.randn(1024), torch.randn(1024)), "cpp"),
    "add_relu_triton": (_add_relu, (torch.randn(1024), torch.randn(1024)), "triton"),
    "softmax_triton": (_softmax, (torch.randn(64, 1000),), "triton"),
    "softmax_long_triton": (_softmax, (torch.randn(8, 8192),), "triton"),
    "transposed_add_cpp": (_transposed_add, (torch.randn(32, 64), torch.randn(64, 32)), "cpp"),
}


def generated(fn: Callable[..., Any], args: tuple[Any, ...], backend: str) -> str:
    (gm, _), = lower_fn(fn, *args)
    inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    src = Path(golden_fns.__file__)
    work = GraphWork(0, gm, inputs, CompileOptions(backend=backend), str(src),
                     src.read_text().splitlines())
    lower(work)
    schedule_stage(work)
    memory_stage(work)
    data = codegen_stage(work)
    parts = [k.source for k in data.kernels]
    wrapper = data.wrapper.source
    parts.append(wrapper[wrapper.index("def call"):])
    return "\n".join(parts)


@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_code_matches_golden(name: str) -> None:
    fn, args, backend = CASES[name]
    text = generated(fn, args, backend)
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("KERNELSCOPE_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), (f"no golden file {path.relative_to(GOLDEN.parents[1])}: run with "
                           "KERNELSCOPE_UPDATE_GOLDEN=1 to write it, then read and commit it")
    assert text == path.read_text()


def test_fused_kernel_names_its_origins_and_lines() -> None:
    text = generated(_add_relu, (torch.randn(64), torch.randn(64)), "triton")
    assert "def triton_poi_fused_add_relu_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK" in text
    assert "# fuses: add (line 8: z = x + y); relu (line 9: return z.relu())" in text
    assert "tmp2 = tmp0 + tmp1" in text and "tl.where(tmp2 < 0, 0.0, tmp2)" in text


def test_transposed_operand_gets_2d_tiles_and_a_reason() -> None:
    text = generated(_transposed_add, (torch.randn(64, 128), torch.randn(128, 64)), "triton")
    assert "yindex = yoffset + tl.arange(0, YBLOCK)[:, None]" in text
    assert "# 2-D tiles over 64 x 128" in text
    assert "ymask & xmask" in text


def test_contiguous_and_broadcast_operands_stay_1d() -> None:
    add_row = lambda x, b: x + b  # noqa: E731
    text = generated(add_row, (torch.randn(64, 128), torch.randn(128)), "triton")
    assert "yindex" not in text
    text = generated(add_row, (torch.randn(64, 128), torch.randn(64, 1)), "triton")
    assert "yindex" not in text


def test_a_missing_golden_file_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "GOLDEN", tmp_path / "golden")
    monkeypatch.delenv("KERNELSCOPE_UPDATE_GOLDEN", raising=False)
    with pytest.raises(AssertionError, match="no golden file"):
        test_generated_code_matches_golden("add_relu_cpp")
    assert not (tmp_path / "golden").exists()
