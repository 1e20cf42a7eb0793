"""Training steps of convolution graphs channels-last (compiler/lowering/layout.py): the
forward keeps the activations it saves for backward NHWC and reports their strides to
AOTAutograd, which compiles the backward for them; the backward feeds cuDNN's
convolution backward NHWC and returns gradients in eager's strides. Before, training
graphs stayed NCHW and cuDNN transposed around every convolution and its backward
(ResNet-50 training step on the H200: 226 layout kernels, 3.3 of 14.2 ms of GPU time).

The rule is asked directly on AOTAutograd's forward and backward graphs; the steps
(train_layout_cases.py) run with the C++ backend here and under the Triton interpreter
in a subprocess, with the layout forced (the "auto" layout is the GPU's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from ks_helpers import interpreter_case_results
from train_layout_cases import CASES, ConvBnRelu, check

from kernelscope.compiler.capture.decompositions import decomposition_table
from kernelscope.compiler.lowering import layout

HERE = Path(__file__).resolve().parent


def _training_graphs(net: torch.nn.Module, x: torch.Tensor) -> dict[str, Any]:
    """AOTAutograd's forward and backward graphs of one step of `net`."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    graphs: dict[str, Any] = {}

    def keep(kind: str) -> Any:
        def compiler(gm: Any, inputs: Any) -> Any:
            graphs[kind] = gm
            return make_boxed_func(gm.forward)
        return compiler

    def backend(gm: Any, inputs: Any) -> Any:
        return aot_module_simplified(gm, inputs, fw_compiler=keep("forward"),
                                     bw_compiler=keep("backward"),
                                     decompositions=decomposition_table())

    torch._dynamo.reset()
    torch.compile(net, backend=backend)(x).sum().backward()
    return graphs


def test_the_rule_takes_training_graphs_channels_last_where_the_backward_follows() -> None:
    graphs = _training_graphs(ConvBnRelu().train(), torch.randn(2, 3, 8, 8))
    fw, bw = graphs["forward"], graphs["backward"]
    on = layout.decide(fw, "forward", "auto", True, "Triton on cuda", saved_free=True)
    assert on.channels_last and "saved for backward stay NHWC" in on.reason
    assert on.convolutions == {"convolution", "convolution_1"}
    # Without a runtime that compiles the backward for the forward's strides (the
    # explorer's pipeline captures it first), every saved activation would be copied.
    off = layout.decide(fw, "forward", "auto", True, "Triton on cuda")
    assert not off.channels_last and "captured for eager's strides" in off.reason
    back = layout.decide(bw, "backward", "auto", True, "Triton on cuda", inputs_nhwc=True)
    assert back.channels_last and "2 convolution backwards" in back.reason
    # A backward whose forward stayed in eager's layout stays there too.
    off = layout.decide(bw, "backward", "auto", True, "Triton on cuda")
    assert not off.channels_last and "saved its activations in eager's layout" in off.reason
    assert back.convolutions == {n.name for n in bw.graph.nodes
                                 if n.target is torch.ops.aten.convolution_backward.default}
    assert not layout.decide(bw, "backward", "auto", False, "C++ on cpu", inputs_nhwc=True
                             ).channels_last
    assert not layout.decide(bw, "backward", "contiguous", True, "x").channels_last


def test_grouped_convolutions_keep_training_graphs_in_eager_layout() -> None:
    net = torch.nn.Sequential(torch.nn.Conv2d(32, 32, 3, groups=4), torch.nn.ReLU())
    bw = _training_graphs(net, torch.randn(2, 32, 8, 8))["backward"]
    off = layout.decide(bw, "backward", "auto", True, "Triton on cuda", inputs_nhwc=True)
    assert not off.channels_last and "grouped convolutions (more than one" in off.reason
    # A depthwise convolution (one input channel per group) does not count.
    net = torch.nn.Sequential(torch.nn.Conv2d(32, 32, 3, groups=32), torch.nn.ReLU())
    bw = _training_graphs(net, torch.randn(2, 32, 8, 8))["backward"]
    assert layout.decide(bw, "backward", "auto", True, "Triton on cuda", inputs_nhwc=True
                         ).channels_last


@pytest.mark.parametrize("name", CASES)
def test_training_step_channels_last_matches_eager_cpp(name: str) -> None:
    assert check(name, "cpp") == "ok"


def test_the_auto_layout_follows_the_forward_into_the_backward() -> None:
    """Under "auto" (this device taken as preferring NHWC), the forward learns from
    AOTAutograd's tracing context that its backward follows its strides, and the backward
    finds its saved activations NHWC among its example inputs: both go channels-last."""
    assert check("block_train", "cpp", auto=True) == "ok"


def test_any_nhwc() -> None:
    x = torch.randn(2, 8, 4, 4)
    assert layout.any_nhwc([3, x.to(memory_format=torch.channels_last)])
    assert not layout.any_nhwc([x, torch.randn(2, 1, 4, 4).to(memory_format=torch.channels_last)])


def test_training_step_channels_last_matches_eager_cpp_bf16() -> None:
    assert check("block_eval", "cpp", torch.bfloat16) == "ok"


def test_a_forward_from_the_graph_cache_still_reports_its_strides(tmp_path: Path) -> None:
    """Loaded from the whole-graph cache, the forward is not lowered: the strides it
    reports come from its wrapper, else the backward would index NHWC values as NCHW."""
    assert check("block_train", "cpp", cache_dir=str(tmp_path)) == "ok"
    assert check("block_train", "cpp", cache_dir=str(tmp_path)) == "ok: from the cache"


@pytest.fixture(scope="module")
def triton_results() -> dict[str, str]:
    return interpreter_case_results(HERE / "train_layout_cases.py", "--backend", "triton",
                                    "block_train", "resnext_eval", "blockwide_train",
                                    "blockwide_eval", timeout=900)


@pytest.mark.parametrize("name", ["block_train", "resnext_eval", "blockwide_train",
                                  "blockwide_eval"])
def test_training_step_channels_last_matches_eager_triton(
        name: str, triton_results: dict[str, str]) -> None:
    assert triton_results.get(name) == "ok", triton_results.get(name, "crashed")


@pytest.mark.parametrize("size, stride", [
    ((2, 8, 4, 4), (128, 1, 32, 8)),  # NHWC
    ((1, 8, 1, 1), (8, 1, 8, 8)),  # per-channel statistics kept NHWC (size-1 dims)
    ((3, 5, 7), (35, 7, 1)),  # row-major
    ((3, 5, 7), (1, 21, 3)),  # another dense order
])
def test_storage_positions_map_back_to_coordinates(size: tuple[int, ...],
                                                   stride: tuple[int, ...]) -> None:
    """Fusion recomputes a pointwise value inside a reduction at the coordinates of the
    storage position it reads (schedule/fusion.py `_coords`): any dense dim order."""
    import itertools

    import sympy

    from kernelscope.compiler.schedule.fusion import _coords

    for point in itertools.product(*(range(s) for s in size)):
        flat = sum(p * st for p, st in zip(point, stride))
        coords = _coords(sympy.Integer(flat), list(size), list(stride), 0)
        assert coords is not None
        got = [int(c) for c in coords]
        assert got == [p if s != 1 else 0 for p, s in zip(point, size)]
    assert _coords(0, [2, 3], [3, 2], 0) is None  # overlapping: no coordinates


def test_a_backward_run_eagerly_gets_its_inputs_as_traced(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A backward whose compile fails runs its graph eagerly, on the activations the
    compiled forward saved NHWC: they are copied into the strides the graph was traced
    with first (a `view` of one in the graph would fail on NHWC), and the gradients are
    eager's."""
    import copy
    import tempfile

    from kernelscope.compiler import compile_fx as cfx
    from kernelscope.compiler.lowering.common import Unsupported
    from kernelscope.compiler.options import CompileOptions
    from kernelscope.compiler.training import as_traced

    compile_graph = cfx.compile_fx

    def no_backward(gm: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("kind") == "backward":
            raise Unsupported("refused by the test")
        return compile_graph(gm, inputs, *args, **kwargs)

    monkeypatch.setattr(cfx, "compile_fx", no_backward)
    torch.manual_seed(0)
    # The backward reads the saved ReLU output (NHWC) beside a gradient viewed from a
    # matrix product (NCHW); `as_traced` itself is checked below.
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Flatten(), torch.nn.Linear(512, 4))
    x = torch.randn(2, 3, 8, 8)
    ref = copy.deepcopy(net)
    options = CompileOptions.from_mapping({"backend": "cpp", "conv_layout": "channels_last",
                                           "cache_dir": tempfile.mkdtemp()})
    torch._dynamo.reset()
    with pytest.warns(UserWarning, match="running graph 1 eagerly: refused by the test"):
        torch.compile(net, backend=cfx.make_backend(options))(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(net.parameters(), ref.parameters()):
        assert p.grad is not None and q.grad is not None
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    nhwc = torch.randn(2, 8, 4, 4).to(memory_format=torch.channels_last)
    same, copied, _ = as_traced([nhwc, nhwc, 3], [nhwc.stride(), (128, 16, 4, 1), None])
    assert same is nhwc and copied.is_contiguous() and torch.equal(copied, nhwc)


def test_bf16_autocast_training_step_is_as_close_to_fp64_as_eager() -> None:
    """The training benchmark's setting (bf16 autocast), C++ backend, channels-last: each
    gradient's relative L2 error against float64 at most 1.5x eager's own (+1e-3)."""
    import copy
    import tempfile

    from train_layout_cases import model

    from kernelscope.compiler import compile_fx as cfx
    from kernelscope.compiler.options import CompileOptions

    net, x, train = model("resnet_train")
    net.train(train)
    ref, ref64 = copy.deepcopy(net), copy.deepcopy(net).double()
    options = CompileOptions.from_mapping({"backend": "cpp", "conv_layout": "channels_last",
                                           "cache_dir": tempfile.mkdtemp()})
    torch._dynamo.reset()
    compiled = torch.compile(net, backend=cfx.make_backend(options))
    for m in (compiled, ref):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(x)
        out.float().sum().backward()
    ref64(x.double()).sum().backward()
    for (name, p), q, r in zip(net.named_parameters(), ref.parameters(), ref64.parameters()):
        assert p.grad is not None and q.grad is not None and r.grad is not None
        scale = float(r.grad.norm()) + 1e-12
        ours = float((p.grad.double() - r.grad).norm()) / scale
        eager = float((q.grad.double() - r.grad).norm()) / scale
        assert ours <= 1.5 * eager + 1e-3, (name, ours, eager)
