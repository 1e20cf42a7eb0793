"""The whole-graph layout of convolution graphs (compiler/lowering/layout.py).

The rule (which graphs, which nodes, and why) is asked directly; then ResNet-style graphs
are compiled on the CPU with the C++ backend and the layout forced channels-last (the
"auto" layout is CUDA-only, codegen/targets.py): every 4-D value between convolutions is
stored NHWC (the only conversions are of the graph's inputs and weights), the graph
outputs keep eager's strides, and the results equal eager's. Without the whole-graph
decision the values between convolutions were stored NCHW and converted at every
convolution (ResNet-50 on the H200: 6.5 -> 10.3 ms).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from ks_helpers import lower_fn
from torch import nn

from benchmarks.cases import BasicBlock
from kernelscope import compiler
from kernelscope.compiler import compile_fx
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.ir.nodes import ComputedBuffer, ExternKernel
from kernelscope.compiler.lowering import layout

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from small_models import make  # noqa: E402


def _block() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    block = BasicBlock(16).eval()
    for bn in (block.bn1, block.bn2):
        bn.running_mean.uniform_(-0.5, 0.5)  # type: ignore[operator, union-attr]
        bn.running_var.uniform_(0.5, 2.0)  # type: ignore[operator, union-attr]
    return block, torch.randn(2, 16, 10, 10)


def _graph(fn: Any, x: torch.Tensor) -> torch.fx.GraphModule:
    (gm, _), = lower_fn(fn, x)
    return gm  # type: ignore[no-any-return]


def test_the_rule_chooses_channels_last_for_cuda_inference_convolution_graphs() -> None:
    block, x = _block()
    gm = _graph(block, x)
    on = layout.decide(gm, "inference", "auto", True, "Triton on cuda")
    assert on.channels_last and "2 convolutions on Triton on cuda" in on.reason
    assert on.convolutions == {"convolution", "convolution_1"}
    # batch norm and ReLU between the convolutions, and everything after, go NHWC
    assert {"relu", "relu_1", "add_4"} <= on.nodes
    assert on.strides_for("relu", (2, 16, 10, 10)) == (1600, 1, 160, 16)
    assert on.strides_for("relu", (2, 16)) is None
    assert on.to_event().layout == "channels_last" and "channels-last" in on.note()
    assert not layout.decide(gm, "inference", "contiguous", True, "x").channels_last
    forced = layout.decide(gm, "forward", "channels_last", False, "C++ on cpu")
    assert forced.channels_last and forced.nodes == on.nodes


@pytest.mark.parametrize("kind, preferred, why", [
    ("inference", False, "C++ on cpu does not prefer channels-last convolutions"),
    ("forward", True, "a training forward whose backward was captured for eager's strides"),
    (None, True, "unknown kind"),
])
def test_the_rule_says_why_it_leaves_a_graph_alone(kind: str | None, preferred: bool,
                                                     why: str) -> None:
    block, x = _block()
    off = layout.decide(_graph(block, x), kind, "auto", preferred, "C++ on cpu")
    assert not off.channels_last and why in off.reason and not off.nodes
    assert off.to_event().layout == "contiguous" and off.to_event().convolutions
    assert off.strides_for("relu", (2, 16, 10, 10)) is None


def _patch_embedding_and_a_long_tail(x: torch.Tensor) -> torch.Tensor:
    """One convolution in front of many other ops (ViT's patch embedding): Inductor
    leaves such graphs in eager's layout (jx_nest_base, volo_d1_224 were slower)."""
    y = F.conv2d(x, torch.ones(4, 3, 2, 2), stride=2).flatten(2)
    for _ in range(160):
        y = y * 1.01 + 0.1
    return y


def test_grouped_convolutions_and_graphs_with_few_convolutions_stay_in_eager_layout() -> None:
    w = torch.randn(32, 8, 3, 3)
    grouped = _graph(lambda x: F.conv2d(x, w, groups=4).relu(), torch.randn(2, 32, 8, 8))
    off = layout.decide(grouped, "inference", "auto", True, "Triton on cuda")
    assert not off.channels_last and "grouped convolutions dominate" in off.reason
    few = _graph(_patch_embedding_and_a_long_tail, torch.randn(2, 3, 8, 8))
    off = layout.decide(few, "inference", "auto", True, "Triton on cuda")
    assert not off.channels_last and "1 convolutions in a graph of" in off.reason
    plain = _graph(lambda x: x.relu() * 2, torch.randn(4))
    assert layout.decide(plain, "inference", "auto", True, "Triton") is layout.NO_CONVOLUTIONS


def _compile(fn: Any, x: torch.Tensor, conv_layout: str, cache: Path,
             monkeypatch: pytest.MonkeyPatch) -> tuple[Any, GraphWork, Any]:
    """fn compiled by the torch.compile backend with the C++ backend: its result on x,
    and the graph's work and `lowering` event."""
    kept: list[tuple[GraphWork, Any]] = []
    lower = compile_fx.lower

    def keep(work: GraphWork) -> Any:
        kept.append((work, lower(work)))
        return kept[-1][1]

    monkeypatch.setattr(compile_fx, "lower", keep)
    options = {"backend": "cpp", "conv_layout": conv_layout, "cache_dir": str(cache)}
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(fn, backend=lambda gm, ex: compiler.backend(
            gm, ex, options=options))(x)
    (work, event), = kept
    assert work.kind == "inference" and event.layout is not None
    assert any(n.startswith("layout: ") for n in event.notes)
    return got, work, event


@pytest.mark.parametrize("name", ["basic_block", "resnet", "resnext"])
def test_convolution_graphs_stay_channels_last_between_convolutions(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = _block() if name == "basic_block" else make(name)
    model = model.eval()
    got, work, event = _compile(model, x, "channels_last", tmp_path, monkeypatch)
    assert event.layout.layout == "channels_last"
    lowered = work.lowered
    assert lowered is not None
    outputs = lowered.output_names()
    four_d = [b for b in lowered.buffers if isinstance(b, (ComputedBuffer, ExternKernel))
              and len(b.layout.size) == 4 and b.name not in outputs
              and b.layout.size[1] > 1 and b.layout.size[2] * b.layout.size[3] > 1]
    assert four_d
    nchw = [b.name for b in four_d if not layout.is_channels_last(b.layout.size,
                                                                  b.layout.stride)]
    assert nchw == []
    # Every copy to NHWC copies a graph input (the image, a weight), never a value computed
    # in the graph: those are NHWC already.
    copies = [b for b in event.buffers if b.realized.startswith("channels-last")
              and isinstance(b.tree, dict) and b.tree.get("op") == "load"]
    read = {r.buffer for b in copies for r in b.reads}
    inputs = {b.name for b in lowered.inputs}
    assert copies and read <= inputs, read - inputs
    with torch.no_grad():
        want = model(x)
    assert got.stride() == want.stride() and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_auto_on_the_cpu_keeps_eager_layout_and_the_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, x = _block()
    got, work, event = _compile(model, x, "auto", tmp_path, monkeypatch)
    assert event.layout.layout == "contiguous" and "does not prefer" in event.layout.reason
    assert work.lowered is not None
    convs = [b for b in work.lowered.buffers if isinstance(b, ExternKernel)]
    assert convs and all(b.layout.stride == (1600, 100, 10, 1) for b in convs)
    with torch.no_grad():
        torch.testing.assert_close(got, model(x), rtol=1e-4, atol=1e-4)
