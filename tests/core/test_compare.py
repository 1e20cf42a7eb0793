"""The FX-node matcher (compiler/compare/match.py) and Inductor's output code read as
kernels, calls, bytes and FX nodes (compiler/compare/inductor_code.py), on code the
installed Inductor generates in the test."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelscope.compiler.compare.inductor_code import kind_of, read_output
from kernelscope.compiler.compare.match import KernelRef, match, summary
from kernelscope.compiler.runtime.inductor import inductor_output


def _k(name: str, nodes: str, graph: int = 0, ms: float | None = 1.0,
       nbytes: int | None = 8) -> KernelRef:
    return KernelRef(name, graph, tuple(nodes.split()), ms, nbytes)


def test_groups_join_kernels_that_share_an_fx_node() -> None:
    ours = [_k("a0", "mean var sub"), _k("a1", "mm"), _k("a2", "relu", ms=None)]
    theirs = [_k("b0", "mean"), _k("b1", "var sub"), _k("b2", "mm"), _k("b3", "relu"),
              _k("b4", "sdpa")]
    groups = match(ours, theirs)
    assert [(g.a, g.b, g.how) for g in groups] == [
        (["a0"], ["b0", "b1"], "A fuses more"),
        (["a1"], ["b2"], "same FX nodes"),
        (["a2"], ["b3"], "same FX nodes"),
        ([], ["b4"], "only B"),
    ]
    assert groups[0].nodes == ["mean", "var", "sub"]
    assert groups[0].a_ms == 1.0 and groups[0].b_ms == 2.0 and groups[0].b_bytes == 16
    assert groups[2].a_ms is None and groups[2].b_ms == 1.0  # one side untimed: no sum
    assert summary(groups) == {"A fuses more": 1, "same FX nodes": 2, "only B": 1}


def test_the_same_node_name_in_two_graphs_is_two_nodes() -> None:
    groups = match([_k("fw", "add", graph=0), _k("bw", "add", graph=1)],
                   [_k("i0", "add", graph=0), _k("i1", "add mul", graph=1),
                    _k("i2", "mul", graph=1)])
    assert [(g.graph, g.a, g.b, g.how) for g in groups] == [
        (0, ["fw"], ["i0"], "same FX nodes"), (1, ["bw"], ["i1", "i2"], "A fuses more")]


def test_chains_and_unknown_graphs() -> None:
    """A kernel sharing one node with each of two others joins all three (several against
    several: regrouped); a kernel of no known graph matches nothing."""
    groups = match([_k("a0", "x y"), _k("a1", "z")],
                   [_k("b0", "y z"), _k("b1", "x"), KernelRef("b2", None, ("x",))])
    assert [(g.a, g.b, g.how) for g in groups] == [
        (["a0", "a1"], ["b0", "b1"], "regrouped"), ([], ["b2"], "only B")]


def _ln_mm(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = x.mean(dim=-1, keepdim=True)
    var, _ = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    y = (x - mean) * torch.rsqrt(var + 1e-5)
    return y @ w, y.sum(0)


def test_inductor_kernels_with_their_calls_nodes_and_bytes() -> None:
    """Our graph through stock Inductor (provenance on): one entry per call, extern calls
    included, each with the nodes of *our* graph it covers (Dynamo's `var_mean_correction`
    is our `var_mean`) and the bytes of the buffers it takes."""
    x, w = torch.randn(64, 128), torch.randn(128, 16)
    gm = make_fx(_ln_mm)(x, w)
    names = {n.name for n in gm.graph.nodes}
    assert "var_mean" in names

    def build(graphs):
        compiled = torch.compile(gm, backend=graphs.backend(7, gm))
        return lambda: compiled(x, w)

    out, fn, _ = inductor_output(build)
    assert out["error"] is None and fn is not None
    torch.testing.assert_close(fn(), _ln_mm(x, w))
    kernels = out["kernels"]
    assert all(k["graph"] == 7 for k in kernels)
    [mm] = [k for k in kernels if k["kind"] == "extern"]
    assert mm["name"] == "extern_kernels.mm" and mm["nodes"] == ["mm"] and mm["source"] == ""
    assert mm["bytes"] == (64 * 128 + 128 * 16 + 64 * 16) * 4
    made = [k for k in kernels if k["kind"] != "extern"]
    covered = {n for k in made for n in k["nodes"]}
    assert {"mean", "var_mean", "sub", "rsqrt", "mul", "sum_1"} <= covered <= names
    assert all(k["source"] and k["language"] == "cpp" and k["call"] for k in kernels[:1])
    assert len({k["call"] for k in kernels}) == len(kernels)


def test_output_code_without_a_mapping_reads_the_source_node_comments() -> None:
    """The form a Triton module takes (comments above the kernel and the extern call):
    nodes from the comments, a kernel called twice is two calls, views and reuses sized."""
    module = '''
# kernel path: /tmp/x.py
# Topologically Sorted Source Nodes: [add, relu], Original ATen: [aten.add, aten.relu]
triton_poi_fused_add_relu_0 = async_compile.triton('triton_poi_fused_add_relu_0', \'\'\'
@triton.jit
def triton_poi_fused_add_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    pass
\'\'\', device_str='cuda')

def call(args):
    arg0_1, arg1_1 = args
    assert_size_stride(arg0_1, (16, 8), (8, 1))
    buf0 = empty_strided_cuda((16, 8), (8, 1), torch.float32)
    triton_poi_fused_add_relu_0.run(arg0_1, buf0, 128, stream=stream0)
    buf1 = empty_strided_cuda((16, 4), (4, 1), torch.float16)
    # Topologically Sorted Source Nodes: [mm], Original ATen: [aten.mm]
    extern_kernels.mm(buf0, reinterpret_tensor(arg1_1, (8, 4), (4, 1), 0), out=buf1)
    buf2 = buf0; del buf0  # reuse
    triton_poi_fused_add_relu_0.run(buf2, buf2, 128, stream=stream0)
    return (buf1, )

def get_args():
    arg0_1 = rand_strided((16, 8), (8, 1), device='cuda:0', dtype=torch.float32)
    arg1_1 = rand_strided((8, 4), (4, 1), device='cuda:0', dtype=torch.float16)
'''
    code = read_output(module)
    assert [(k.call, k.kind, k.nodes, k.bytes) for k in code.kernels] == [
        ("triton_poi_fused_add_relu_0", "pointwise", ["add", "relu"], 16 * 8 * 4 * 2),
        ("extern_kernels.mm", "extern", ["mm"], 16 * 8 * 4 + 8 * 4 * 2 + 16 * 4 * 2),
        ("triton_poi_fused_add_relu_0#2", "pointwise", ["add", "relu"], 16 * 8 * 4),
    ]
    assert code.kernels[0].language == "python" and "@triton.jit" in code.kernels[0].source
    assert "<kernel triton_poi_fused_add_relu_0: " in code.wrapper
    assert "def triton_poi" not in code.wrapper and not code.provenance
    assert kind_of("cpp_fused_sum_1") == "" and kind_of("triton_red_fused_sum_0") == "reduction"
