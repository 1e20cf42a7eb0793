"""Column reductions: the split into two passes (lowering/reductions.py column_splits),
column tiles (codegen/tiling.py column_walk, triton_rules.column_config), a producer over
the rows walked in the reduction's order (codegen/reduction.py ReductionWalks) and loads
masked by the `where` that selects them (triton.py). The decisions are checked on the generated
kernels; the results against eager through the C++ backend (in-process) and the Triton
interpreter (column_cases.py, in a process of its own)."""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from column_cases import CASES, check
from ks_helpers import interpreter_case_results, lower_fn

from benchmarks.cases import gelu_bias_grad, mha_inproj_bias_grad
from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.codegen.triton.kernel import TritonKernel, generate_triton, rules
from kernelscope.compiler.ir.opnames import op_short
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.scheduler import schedule

HERE = Path(__file__).resolve().parent
TRITON = choose_backend("triton", "cpu", CompileOptions())


@pytest.mark.parametrize("name", sorted(CASES))
def test_cpp_matches_eager(name: str) -> None:
    assert check(name, "cpp") == "ok"


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    return interpreter_case_results(HERE / "column_cases.py", "triton")


@pytest.mark.parametrize("name", sorted(CASES))
def test_triton_interpreter_matches_eager(name: str, interpreter_results: dict[str, str]
                                          ) -> None:
    assert interpreter_results.get(name) == "ok", interpreter_results.get(name)


def _reasons(fn: Callable[..., Any], *args: Any) -> list[str]:
    (_, lowered), = lower_fn(fn, *args)
    return [b.realized for b in lowered.buffers if "split" in str(getattr(b, "realized", ""))]


def _kernels(fn: Callable[..., Any], *args: Any) -> list[TritonKernel]:
    (gm, lowered), = lower_fn(fn, *args)
    op_names = {n.name: op_short(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    s = schedule(lowered, TRITON, op_names=op_names)
    return [generate_triton(st.plan, [], 4096) for st in s.steps
            if st.plan is not None and st.plan.kind.reduces]


def test_bias_gradients_split_into_partials_over_the_outputs() -> None:
    # ViT-B/16's fc1 bias gradient: 3072 outputs are 192 column programs; 8 splits of 1576
    # rows (12608 = 8 x 1576 exactly: no mask) make 1536.
    assert _reasons(lambda x: x.sum(0), torch.randn(12608, 3072)) == [
        "column split reduction: 12608 = 8 x 1576 (pass 1 of 2)",
        "column split reduction: 12608 = 8 x 1576 (pass 2 of 2)"]
    # Rows that no split near the wanted one divides: a masked first pass.
    assert _reasons(lambda x: x.sum(0), torch.randn(1009, 37))[0] == \
        "column split reduction: 1009 = 3 x 337 (pass 1 of 2)"
    # However few the outputs (a batch norm over 8 channels NHWC): a column split; it was
    # split along the rows into [outputs, parts], its loads striding across the columns.
    assert _reasons(lambda x: x.sum(0), torch.randn(32768, 8))[0] == \
        "column split reduction: 32768 = 128 x 256 (pass 1 of 2)"
    assert _reasons(lambda x: x.sum(1), torch.randn(8, 32768))[0] == \
        "split reduction: 32768 = 8 x 4096 (pass 1 of 2)"


@pytest.mark.parametrize("fn, shape, why", [
    (lambda x: x.sum(0), (256, 3072), "rows too short to split"),
    (lambda x: x.sum(0), (4096, 16384), "16384 outputs are 1024 programs already"),
    (lambda x: x.sum(1), (3072, 12608), "a row reduction (its loads step along the rows)"),
])
def test_what_stays_one_reduction(fn: Callable[..., Any], shape: tuple[int, int],
                                  why: str) -> None:
    assert _reasons(fn, torch.randn(*shape)) == [], why


def test_few_long_row_sums_split_in_whole_outer_slices() -> None:
    """A batch norm's weight gradient over NCHW (128 channels, 32 x 32 x 32): 128 programs
    of one row are a quarter of a wave; 8 parts of 4 images make 1024, and the ReLU
    backward fused in is computed once (its read divides rindex alone)."""
    from column_cases import _bn_weight_grads

    args = tuple(torch.randn(32, 128, 32, 32) for _ in range(3))
    assert _reasons(_bn_weight_grads, *args)[:2] == [
        "split reduction: 32768 = 8 x 4096 (pass 1 of 2)",
        "split reduction: 32768 = 8 x 4096 (pass 2 of 2)"]
    first = _kernels(_bn_weight_grads, *args)[0]
    assert first.grid == (1024,)
    assert [len(re.findall(rf"tl\.load\(in_ptr{i} ", first.source)) for i in range(3)] == \
        [1, 1, 1], first.source
    # sums only (a max and its NaN check stay one kernel), and up to 528 outputs
    assert _reasons(lambda x: x.amax(-1), torch.randn(128, 32768)) == []
    assert _reasons(lambda x: x.sum(-1), torch.randn(600, 32768)) == []


def test_the_column_rule_fills_the_gpu_and_covers_short_rows() -> None:
    def cfg(x: int, r: int) -> dict[str, Any]:
        return rules.column_config(types.SimpleNamespace(xnumel=x, rnumel=r))  # type: ignore[arg-type]

    first = cfg(8 * 2304, 1576)  # the in-projection's first pass
    assert (first["XBLOCK"], first["RBLOCK"], first["grid"], first["persistent"]) == \
        (16, 256, (1152,), False)
    second = cfg(2304, 8)  # its second pass: 8 partials per output, one step
    assert (second["XBLOCK"], second["RBLOCK"], second["grid"], second["persistent"]) == \
        (128, 8, (18,), True)
    few = cfg(768, 12608)  # 48 programs of 16: fewer outputs per program
    assert few["XBLOCK"] == 4 and few["XBLOCK"] * few["RBLOCK"] == rules.COLUMN_TILE


def test_a_fused_producer_is_walked_in_the_column_order_and_computed_once() -> None:
    """GELU's backward, stored for the weight GEMM and summed for the bias: it was
    computed twice, once along the rows for its store and once down the columns for the
    sum, one output per program (590 us on the H200 where Inductor took 36)."""
    first = _kernels(gelu_bias_grad, torch.randn(1576, 3072), torch.randn(1576, 3072))[0]
    src = first.source
    assert "column tiles: every load steps 1 along the" in src
    assert len(re.findall(r"tl\.load\(in_ptr0 ", src)) == 1, src
    assert len(re.findall(r"tl\.erf\(", src)) == 1, src
    stores = re.findall(r"tl\.store\(out_ptr0 \+ \(([^)]*)\)", src)
    loads = re.findall(r"tl\.load\(in_ptr0 \+ \(([^)]*)\)", src)
    assert stores == loads, src  # the producer's store walks as its loads do
    assert first.meta["XBLOCK"] == 16 and first.grid[0] == 8 * 3072 // 16


def test_producers_without_a_reader_walk_down_the_columns_too() -> None:
    """A copy of the input fused beside a column sum (the out-projection's [L, B, E] and
    [E, L*B] gradients next to its bias gradient) walks as the sum does: one load of g
    feeds all three stores, in column tiles (it was walked along the rows, its load
    stepping along the reduction: one output per program)."""
    from column_cases import _out_proj_grads

    src, = [k.source for k in _kernels(_out_proj_grads, torch.randn(2, 197, 768))]
    assert "column tiles: every load steps 1 along the 768 outputs" in src, src
    assert len(re.findall(r"tl\.load\(", src)) == 1, src
    assert len(re.findall(r"tl\.store\(", src)) == 3, src


def test_selected_gradients_load_only_their_own_third() -> None:
    """select_backward's where(i == k, grad_k, 0): each of q/k/v's gradients is loaded
    under its condition, so the other two thirds of the outputs fetch nothing."""
    args = tuple(torch.randn(4, 150, 2, 8).transpose(1, 2) for _ in range(3))
    src = next(k.source for k in _kernels(mha_inproj_bias_grad, *args) if "in_ptr2" in k.source)
    loads = re.findall(r"tl\.load\(in_ptr\d[^\n]*", src)
    assert len(loads) == 3, src
    assert all(re.search(r"xmask & rmask & tmp\d+, other=0\)", ld) for ld in loads), loads


def _channels_last_kernels(fn: Callable[..., Any], *args: Any
                           ) -> tuple[list[TritonKernel], list[str]]:
    """fn's reduction kernels for Triton (codegen only) and the lowering's split reasons,
    its graph laid out channels-last as a convnet's training graph is (layout.decide)."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from kernelscope.compiler.capture.decompositions import decomposition_table
    from kernelscope.compiler.lowering import layout
    from kernelscope.compiler.lowering.graph import GraphLowering

    graphs: list[Any] = []

    def keep(gm: Any, inputs: Any) -> Any:
        graphs.append((gm, inputs))
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=lambda gm, inputs: aot_module_simplified(
            gm, inputs, fw_compiler=keep, decompositions=decomposition_table()))(*args)
    (gm, inputs), = graphs
    decision = layout.decide(gm, None, "channels_last", True, "the test")
    lowered = GraphLowering(gm, inputs, None, TRITON, CompileOptions(), decision).run()
    op_names = {n.name: op_short(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    s = schedule(lowered, TRITON, op_names=op_names)
    kernels = [generate_triton(st.plan, [], 4096) for st in s.steps
               if st.plan is not None and st.plan.kind.reduces]
    return kernels, [str(getattr(b, "realized", "")) for b in lowered.buffers]


@pytest.mark.parametrize("c, hw, split", [
    (256, 56, "200704 = 64 x 3136"),  # layer1's output: a part an image
    (64, 56, "200704 = 256 x 784"),  # 64 channels: few outputs, a column split all the same
    (512, 7, "3136 = 14 x 224"),  # layer4's width: parts of 4.57 images
    (2048, 7, "3136 = 8 x 392"),
])
def test_nhwc_batch_norm_backward_sums_take_column_tiles_at_resnet_shapes(
        c: int, hw: int, split: str) -> None:
    """ResNet-50's batch norm backward in its training step (64 images, channels-last):
    the sums over N x H x W of the ReLU's masked gradient are column reductions, split
    into [parts, C] partials (a program of 16 channels x 256 rows per step; >= 448
    programs), and the input gradient fed to the convolution's backward is stored from
    the same loads, down the same columns. They were one channel a program over
    strided rows (persistent, 0.8-1.8 ms each on the H200), or rows split across
    channels. Meta tensors: codegen only."""
    from column_cases import bn_relu_backward

    def nhwc(*size: int) -> torch.Tensor:
        return torch.empty(*size, device="meta").to(memory_format=torch.channels_last)

    acts = [nhwc(64, c, hw, hw) for _ in range(5)]
    vec = torch.empty(c, device="meta")
    kernels, reasons = _channels_last_kernels(
        bn_relu_backward, *acts[:4], vec, vec.clone(), acts[4],
        torch.empty(c, c, 1, 1, device="meta"))
    assert f"column split reduction: {split} (pass 1 of 2)" in reasons, reasons
    first, *second = kernels
    src = first.source
    assert "# column tiles: every load steps 1 along the" in src, src
    assert first.meta["XBLOCK"] == 16 and first.grid[0] >= 448, (first.meta, first.grid)
    loads = [re.findall(rf"tl\.load\(in_ptr{i} \+ \(([^)]*)\)", src) for i in range(4)]
    assert all(len(ld) == 1 for ld in loads), src  # out, g1, g2, x: once each
    stores = re.findall(r"tl\.store\(out_ptr2 \+ \(([^)]*)\)", src)
    assert stores == loads[0], src  # the conv's input gradient: the loads' positions
    assert all("column tiles" in k.source for k in second)


def _triton_steps(fn: Callable[..., Any], *args: Any) -> list[Any]:
    """fn's one graph lowered and scheduled for Triton with the backend's own options (its
    realize rule), as the compiler does: the schedule's generated kernels."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from kernelscope.compiler.capture.decompositions import decomposition_table
    from kernelscope.compiler.compile_fx import lower, schedule_stage
    from kernelscope.compiler.graph_work import GraphWork

    works: list[GraphWork] = []

    def fw(gm: Any, inputs: Any) -> Any:
        work = GraphWork(0, gm, list(inputs), CompileOptions(backend="triton"))
        lower(work)
        schedule_stage(work)
        works.append(work)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=lambda gm, inputs: aot_module_simplified(
            gm, inputs, fw_compiler=fw, decompositions=decomposition_table()))(*args)
    (work,) = works
    assert work.sched is not None
    return [s for s in work.sched.steps if s.plan is not None]


def test_layer_norm_backward_is_three_kernels_as_inductors() -> None:
    """GPT-2's layer-norm backward (4096 tokens x 768) on Triton: the row kernel computes
    the input gradient from its row sums (x_hat and grad * weight recomputed, not stored:
    realize rule one-read); the weight and bias gradients' first passes are one column
    kernel that recomputes x_hat from x, mean and rstd, their second passes one launch. It
    was four kernels and stored x_hat (a float32 tensor written once, read again); with
    x_hat recomputed, the input gradient joined the column kernel, gathering per-row
    statistics along its column tiles (a vertical pair also sharing the inputs scored only
    its per-row sums)."""
    from benchmarks.cases import layernorm_backward

    t, c = 4096, 768
    x = torch.randn(t, c)
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)
    steps = _triton_steps(layernorm_backward, torch.randn(t, c), x, mean, rstd,
                          torch.randn(c), torch.randn(c))
    assert [(s.plan.xnumel, s.plan.rnumel) for s in steps] == [(t, c), (16 * c, t // 16),
                                                               (c, 16)], steps
    row, first, second = (s.plan for s in steps)
    assert len(row.stores) == 1  # the input gradient alone
    assert len(first.stores) == 2 and len(second.stores) == 2
    shapes = {tuple(row.buffers[n].layout.size) for n in row.inputs}
    assert shapes == {(t, c), (t, 1), (c,)}, shapes  # grad, x; mean, rstd; weight
