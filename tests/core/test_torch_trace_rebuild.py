# ruff: noqa: E501  (the graph below is printed as torch prints it, one node a line)
"""A logged static graph rebuilt by Kernelscope (compiler/trace/rebuild.py): which graphs can
be, the snippet made from the graph's own code, its output against the logged graph run
eagerly, and the match of our kernels with Inductor's logged ones by FX node."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernelscope.compiler import backend
from kernelscope.compiler.trace import rebuild
from kernelscope.compiler.trace.torch_trace_events import fx_nodes

# A backward graph as torch 2.13 prints it in a TORCH_TRACE log (GELU's, with a non-contiguous
# input view, a scalar tangent expanded, and a `None` output).
BACKWARD = '''class <lambda>(torch.nn.Module):
    def forward(
        self,
        primals_3: "f32[4, 8][8, 1]cpu",  # PlainAOTInput(idx=2)
        addmm: "f32[4, 4][1, 4]cpu",
        tangents_1: "f32[][]cpu",  # TangentAOTInput(output=PlainAOTOutput(idx=0))
    ):
        # File: /u/model.py:14 in <lambda>, code: loss = gelu(lin(x)).sum()
        expand: "f32[4, 4][0, 0]cpu" = torch.ops.aten.expand.default(tangents_1, [4, 4]);  tangents_1 = None
        mul_1: "f32[4, 4][4, 1]cpu" = torch.ops.aten.mul.Tensor(addmm, 0.7071067811865476)
        erf: "f32[4, 4][4, 1]cpu" = torch.ops.aten.erf.default(mul_1);  mul_1 = None
        add: "f32[4, 4][4, 1]cpu" = torch.ops.aten.add.Tensor(erf, 1);  erf = None
        mul_4: "f32[4, 4][4, 1]cpu" = torch.ops.aten.mul.Tensor(add, 0.5);  add = None
        mul_9: "f32[4, 4][4, 1]cpu" = torch.ops.aten.mul.Tensor(expand, mul_4);  expand = mul_4 = None
        permute_1: "f32[4, 4][1, 4]cpu" = torch.ops.aten.permute.default(mul_9, [1, 0])
        mm: "f32[4, 8][8, 1]cpu" = torch.ops.aten.mm.default(permute_1, primals_3);  permute_1 = primals_3 = None
        sum_2: "f32[1, 4][4, 1]cpu" = torch.ops.aten.sum.dim_IntList(mul_9, [0], True);  mul_9 = None
        view: "f32[4][1]cpu" = torch.ops.aten.view.default(sum_2, [4]);  sum_2 = None
        return (
            mm,  # GradAOTOutput(grad_of=PlainAOTInput(idx=0))
            view,  # GradAOTOutput(grad_of=PlainAOTInput(idx=1))
            None,  # None
        )
'''


def graph_event(text: str, gid: int = 3, name: str = "2/0 backward") -> dict[str, Any]:
    nodes, edges = fx_nodes(text, "/u/model.py")
    return {"id": gid, "name": name, "code": text, "nodes": [vars(n) for n in nodes],
            "edges": edges, "kind": "backward"}


def run_rebuilt(code: str) -> tuple[Any, Any]:
    """The snippet's module and inputs (its code up to the compile), compiled by Kernelscope
    and run eagerly: (ours, eager)."""
    space: dict[str, Any] = {}
    exec(compile(code.split("graph = torch.compile(")[0], "<rebuilt>", "exec"), space)
    module, inputs = space["LoggedGraph"](), space["inputs"]
    eager = module(*inputs)
    torch._dynamo.reset()
    ours = torch.compile(module, backend=backend)(*inputs)
    return ours, eager


def assert_same(ours: Any, eager: Any) -> None:
    assert len(ours) == len(eager)
    for a, b in zip(ours, eager):
        if b is None:
            assert a is None
            continue
        assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_a_static_backward_graph_is_rebuilt_and_matches_it_run_eagerly() -> None:
    graph = graph_event(BACKWARD)
    assert rebuild.why_not(graph) is None
    code = rebuild.snippet(graph, "abc123")
    assert rebuild.rebuilt_from(code) == ("abc123", 3)
    compile(code, "<rebuilt>", "exec")  # the whole snippet is Python
    ours, eager = run_rebuilt(code)
    assert_same(ours, eager)
    # The inputs have the logged strides (addmm's is a transposed view).
    space: dict[str, Any] = {}
    exec(compile(code.split("graph = torch.compile(")[0], "<rebuilt>", "exec"), space)
    assert [tuple(x.stride()) for x in space["inputs"]] == [(8, 1), (1, 4), ()]
    # Each logged node is on a line of its own, under its own name.
    names = rebuild.logged_names(code)
    lines = code.splitlines()
    assert sorted(names.values()) == sorted(
        n["name"] for n in graph["nodes"] if n["op"] == "call_function")
    assert all(lines[i - 1].strip().startswith(f"{name}: ") for i, name in names.items())


@pytest.mark.parametrize("change, reason", [
    (('"f32[4, 8][8, 1]cpu",  # PlainAOTInput(idx=2)', '"f32[s0, 8][8, 1]cpu",'),
     "dynamic shape"),
    (("torch.ops.aten.erf.default(mul_1)", "torch.ops.aten.rand_like.default(mul_1)"),
     "random op"),
    (("torch.ops.aten.erf.default(mul_1)", "torch.ops.mylib.erf.default(mul_1)"),
     "not an ATen op"),
    (("torch.ops.aten.erf.default(mul_1)", "torch.ops.higher_order.wrap(self.sub, mul_1)"),
     "subgraph"),
    (("torch.ops.aten.erf.default(mul_1)",
      "torch.ops.aten._scaled_dot_product_efficient_attention_backward.default(mul_1)"),
     "CUDA only"),
])
def test_a_graph_that_cannot_be_rebuilt_says_why(change: tuple[str, str], reason: str) -> None:
    assert reason in str(rebuild.why_not(graph_event(BACKWARD.replace(*change))))


def test_a_user_line_naming_a_submodule_is_no_subgraph() -> None:
    """The `# File:` comments quote the user's code (`self.wte(input_ids)` in GPT-2's): only
    the graph's own code can call a submodule."""
    quoted = BACKWARD.replace("code: loss = gelu(lin(x)).sum()",
                              "code: inputs_embeds = self.wte(input_ids)")
    assert rebuild.why_not(graph_event(quoted)) is None


def test_our_kernels_meet_the_logged_ones_by_the_logged_node_names() -> None:
    """against_log renames Inductor's logged nodes to ours through the snippet's lines: a
    rebuilt node keeps its line even where our capture names it otherwise."""
    code = rebuild.snippet(graph_event(BACKWARD), "LOG")
    line = {v: k for k, v in rebuild.logged_names(code).items()}
    ours_nodes = [{"name": "erf_renamed", "op": "call_function", "line": line["erf"]},
                  {"name": "mul_1", "op": "call_function", "line": line["mul_1"]},
                  {"name": "mm", "op": "call_function", "line": line["mm"]}]
    events = [
        {"stage": "source", "data": {"code": code}},
        {"stage": "capture", "data": {"graphs": [{"id": 0, "nodes": ours_nodes}]}},
        {"stage": "scheduling", "data": {"graphs": [{"id": 0, "kernels": [
            {"name": "cpp_fused_erf_mul_0", "origins": ["mul_1", "erf_renamed"]},
            {"name": "extern_mm_1", "origins": ["mm"], "kind": "extern"}]}]}}]
    log = [
        {"stage": "capture", "data": {"log": {"format": "TORCH_TRACE"},
                                      "graphs": [graph_event(BACKWARD)]}},
        {"stage": "inductor", "data": {"kernels": [
            {"name": "cpp_fused_erf_mul_0", "call": "cpp_fused_erf_mul_0", "graph": 3,
             "nodes": ["mul_1", "erf"]},
            {"name": "cpp_fused_sum_1", "call": "cpp_fused_sum_1", "graph": 3,
             "nodes": ["sum_2"]},
            {"name": "other", "call": "other", "graph": 7, "nodes": ["mm"]}]}}]
    answer = rebuild.against_log(events, log, "LOG")
    hows = {tuple(g["a"]): (g["how"], g["b"]) for g in answer["groups"]}
    assert hows[("cpp_fused_erf_mul_0",)] == ("same FX nodes", ["cpp_fused_erf_mul_0"])
    assert hows[("extern_mm_1",)] == ("only A", [])  # Inductor's mm is graph 7's, not this
    assert hows[()] == ("only B", ["cpp_fused_sum_1"])  # no node of ours on sum_2's line
    assert {k["graph"] for k in answer["inductor"]["kernels"]} == {0}
    with pytest.raises(ValueError, match="no rebuild"):
        rebuild.against_log(events, log, "OTHER")


# A layer norm's forward as torch prints it: var_mean's two outputs are a tuple, printed
# without a type, and read by getitem.
LAYER_NORM = '''class GraphModule(torch.nn.Module):
    def forward(self, primals_1: "f32[4, 8][8, 1]cpu"):
        var_mean = torch.ops.aten.var_mean.correction(primals_1, [1], correction = 0, keepdim = True)
        getitem: "f32[4, 1][1, 1]cpu" = var_mean[0]
        getitem_1: "f32[4, 1][1, 1]cpu" = var_mean[1];  var_mean = None
        add: "f32[4, 1][1, 1]cpu" = torch.ops.aten.add.Tensor(getitem, 1e-05);  getitem = None
        rsqrt: "f32[4, 1][1, 1]cpu" = torch.ops.aten.rsqrt.default(add);  add = None
        sub: "f32[4, 8][8, 1]cpu" = torch.ops.aten.sub.Tensor(primals_1, getitem_1);  primals_1 = None
        mul: "f32[4, 8][8, 1]cpu" = torch.ops.aten.mul.Tensor(sub, rsqrt);  sub = None
        return (mul, rsqrt, getitem_1)
'''


def test_a_node_of_several_outputs_is_read_checked_and_rebuilt() -> None:
    """A tuple-valued node (var_mean, native_dropout) has no type on its line: it is still a
    node (with its getitems), still checked (a random one refuses the graph), and rebuilt."""
    graph = graph_event(LAYER_NORM)
    assert [n["name"] for n in graph["nodes"]][:4] == ["primals_1", "var_mean", "getitem",
                                                       "getitem_1"]
    assert ["var_mean", "getitem_1"] in graph["edges"]
    assert rebuild.why_not(graph) is None
    code = rebuild.snippet(graph, "t")
    assert {"var_mean", "getitem", "getitem_1"} <= set(rebuild.logged_names(code).values())
    assert_same(*run_rebuilt(code))
    dropout = LAYER_NORM.replace("aten.var_mean.correction", "aten.native_dropout.default")
    assert "random op" in str(rebuild.why_not(graph_event(dropout)))
