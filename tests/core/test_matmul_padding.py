"""Matrix products padded for cuBLAS's aligned kernels (compiler/lowering/matmul.py).

The rule is CUDA's; here it is switched on for the CPU (the module's device list and size
threshold patched) so that the padded graph runs and is compared against eager.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from kernelscope.compiler.ir.nodes import ComputedBuffer, ExternKernel
from kernelscope.compiler.lowering import matmul
from tests.core.ks_helpers import check_compiled, compiled, lower_fn


@pytest.fixture
def pad_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matmul, "PAD_DEVICES", ("cuda", "cpu"))
    monkeypatch.setattr(matmul, "PAD_MIN_MACS", 0)


def _lm_head(h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.linear(h, w)  # GPT-2's LM head: [B, T, 768] x [V, 768]^T


def _addmm_gelu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(torch.addmm(b, x, w))


def test_the_plan_pads_misaligned_inner_and_output_sizes(pad_on_cpu: None) -> None:
    (graph,) = [g for _, g in lower_fn(_lm_head, torch.randn(2, 5, 37), torch.randn(101, 37))]
    mms = [b for b in graph.buffers if isinstance(b, ExternKernel)
           and "mm" in str(b.op)]
    assert [tuple(b.layout.size) for b in mms] == [(10, 104)]  # N 101 -> 104 (4 floats)
    padded = [b for b in graph.buffers if isinstance(b, ComputedBuffer)
              and "padded for cuBLAS" in b.realized]
    sizes = sorted(tuple(b.layout.size) for b in padded)
    assert sizes == [(10, 40), (40, 104)], sizes  # K 37 -> 40 in both operands
    weight = next(b for b in padded if tuple(b.layout.size) == (40, 104))
    assert tuple(weight.layout.stride) == (1, 40)  # the transposed weight stays transposed


@pytest.mark.parametrize("fn,shapes", [
    (_lm_head, [(2, 5, 37), (101, 37)]),
    (_addmm_gelu, [(9, 30), (30, 53), (53,)]),
])
def test_padded_products_match_eager_with_eager_strides(pad_on_cpu: None, fn: Any,
                                                        shapes: list[tuple[int, ...]],
                                                        tmp_path: Path) -> None:
    torch.manual_seed(0)
    args = tuple(torch.randn(*s) for s in shapes)
    check_compiled(fn, args, cache_dir=str(tmp_path))
    out = compiled(fn, cache_dir=str(tmp_path / "again"))(*args)
    assert out.is_contiguous()  # the padded product's slice is copied for the output


def test_aligned_or_small_products_are_left_alone() -> None:
    (graph,) = [g for _, g in lower_fn(_lm_head, torch.randn(2, 5, 37), torch.randn(101, 37))]
    assert not any(isinstance(b, ComputedBuffer) and "padded for cuBLAS" in b.realized
                   for b in graph.buffers)  # the CPU: not in PAD_DEVICES
