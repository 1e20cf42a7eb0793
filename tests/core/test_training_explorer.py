"""A training step through the explorer's path (the front half captures the snippet under
its own grad mode into a bundle; the back half compiles every graph from the bundle):
the loss, every gradient and every parameter after AdamW match the same step run eagerly.

Regressions: the front half ran the snippet under no_grad, so a training snippet failed
("element 0 of tensors does not require grad") or compiled an inference graph; then, with
grad mode on, the backward graph ran inside `loss.backward()` while Dynamo was watching
frames and Dynamo traced the capture's own recorder (15 extra graphs of snapshots, and a
compile error in one of them: "too many values to unpack").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelscope.compiler.check import tolerance
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import compiled_works, run_front, run_pipeline
from kernelscope.compiler.snippet import run_snippet
from kernelscope.compiler.training import saved_inputs

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "training_step.py"
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _fresh(inputs: list[Any]) -> list[Any]:
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in inputs]


def _close(got: torch.Tensor, want: torch.Tensor, options: CompileOptions, what: str) -> None:
    atol, rtol = tolerance(want.dtype, options)
    torch.testing.assert_close(got, want, atol=atol, rtol=rtol, msg=what)


@pytest.mark.parametrize("device", DEVICES)
def test_explorer_training_step_matches_eager_loss_grads_and_params(
        device: str, tmp_path: Path) -> None:
    path = tmp_path / "training_step.py"
    shutil.copy(SAMPLE, path)
    options = CompileOptions(device=device, profile=False)
    bundle = tmp_path / "capture.ksb"
    front = list(run_front(path.read_text(), options, bundle, str(path)))
    stages = ["source", *["capture_graph"] * 3, "capture"]
    assert [e.stage for e in front] == stages, [e.data for e in front]
    capture = front[-1].data
    assert [g["kind"] for g in capture["graphs"]] == ["forward", "backward", "inference"]
    assert [b["reason"] for b in capture["graph_breaks"]] == ["Unsupported Tensor.backward() call"]
    fw, bw, opt = compiled_works(bundle, options)

    # Eager: the snippet as written (its own first step), then the second step, which is
    # the one capture traced (it replays the snippet's call on the model as it stands).
    entry = run_snippet(path, device)
    params = list(entry.fn.__globals__["model"].parameters())
    before = [p.detach().clone() for p in params]
    loss = entry.fn(*entry.inputs)
    grads = [p.grad.detach().clone() for p in params]
    after = [p.detach().clone() for p in params]

    # The forward graph's inputs are the parameters as they stood: each one's position.
    where = [next(i for i, a in enumerate(fw.example_inputs)
                  if isinstance(a, torch.Tensor) and a.shape == b.shape and torch.equal(a, b))
             for b in before]
    saved = fw.compiled(*_fresh(fw.example_inputs))
    _close(saved[0], loss.detach(), options, "loss")
    # The backward graph on what the compiled forward saved, with the captured tangent.
    args = _fresh(bw.example_inputs)
    for out_index, in_index in saved_inputs(fw.gm, bw.gm):
        args[in_index] = saved[out_index]
    got_grads = bw.compiled(*args)
    for k, i in enumerate(where):
        _close(got_grads[i], grads[k], options, f"grad of parameter {k}")
    # The optimizer graph (functionalized: it returns each updated state) on the captured
    # state: every parameter's value after the step is one of its outputs.
    outs = opt.compiled(*_fresh(opt.example_inputs))
    used: set[int] = set()
    for k, want in enumerate(after):
        atol, rtol = tolerance(want.dtype, options)
        match = [j for j, o in enumerate(outs) if j not in used and isinstance(o, torch.Tensor)
                 and o.shape == want.shape and torch.allclose(o, want, atol=atol, rtol=rtol)]
        assert match, f"parameter {k} after AdamW: no compiled output matches eager's"
        used.add(match[0])


def test_explorer_trace_of_a_training_step(tmp_path: Path) -> None:
    """Every stage carries the backward graph; the forward's memory plan lists what it saves
    for backward; `run` checks the backward on the compiled forward's activations."""
    path = tmp_path / "training_step.py"
    shutil.copy(SAMPLE, path)
    events = [json.loads(e.to_json()) for e in
              run_pipeline(path.read_text(), CompileOptions(profile=False), str(path))]
    by = {e["stage"]: e["data"] for e in events}
    assert by["done"]["ok"], by.get("error")
    for stage in ("lowering", "scheduling", "memory", "codegen", "compile"):
        assert [g["id"] for g in by[stage]["graphs"]] == [0, 1, 2], stage
    backward_kernels = by["codegen"]["graphs"][1]["kernels"]
    assert backward_kernels and all(k["source"] for k in backward_kernels)
    assert any(n["name"].startswith("tangents") for n in by["capture"]["graphs"][1]["nodes"])
    saved = by["memory"]["graphs"][0]["saved"]
    bw_inputs = [n["name"] for n in by["capture"]["graphs"][1]["nodes"]
                 if n["op"] == "placeholder" and not n["name"].startswith("tangents")]
    assert [s["backward_input"] for s in saved] == bw_inputs
    buffers = {b["name"]: b["bytes"] for b in by["memory"]["graphs"][0]["buffers"]}
    held = [s for s in saved if s["buffer"] is not None]
    assert held and all(s["bytes"] == buffers.get(s["buffer"], s["bytes"]) > 0 for s in held)
    assert "saved" not in by["memory"]["graphs"][1] or not by["memory"]["graphs"][1]["saved"]
    chained = by["run"]["chained"]
    assert [(c["forward"], c["backward"], c["ok"]) for c in chained] == [(0, 1, True)]
    assert all(g["ok"] for g in by["run"]["graphs"])


MODEL_ONLY = """import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
cm = torch.compile(model)
x = torch.randn(5, 8)
out = cm(x)
out.backward(torch.full_like(out, 0.5))
"""


def _forward_and_backward(code: str, options: CompileOptions, tmp_path: Path) -> list[Any]:
    """The snippet's capture must be one forward and one backward graph: both compiled."""
    path = tmp_path / "snippet.py"
    path.write_text(code)
    front = list(run_front(code, options, tmp_path / "b.ksb", str(path)))
    assert [g["kind"] for g in front[-1].data["graphs"]] == ["forward", "backward"]
    return compiled_works(tmp_path / "b.ksb", options)


def test_backward_outside_the_compiled_function_is_captured_with_its_tangent(
        tmp_path: Path) -> None:
    """`torch.compile(model)` with `.backward(grad)` called on its output afterwards: the
    backward graph is compiled and gets the snippet's own gradient as its tangent."""
    options = CompileOptions(profile=False)
    _, bw = _forward_and_backward(MODEL_ONLY, options, tmp_path)
    placeholders = [n.name for n in bw.gm.graph.nodes if n.op == "placeholder"]
    tangent = bw.example_inputs[placeholders.index("tangents_1")]
    assert torch.equal(tangent, torch.full((5, 4), 0.5))


def test_no_grad_snippet_still_compiles_an_inference_graph(tmp_path: Path) -> None:
    code = MODEL_ONLY.replace("out = cm(x)\nout.backward(torch.full_like(out, 0.5))\n",
                              "with torch.no_grad():\n    out = cm(x)\n")
    path = tmp_path / "snippet.py"
    path.write_text(code)
    front = list(run_front(code, CompileOptions(profile=False), tmp_path / "b.ksb", str(path)))
    assert [g["kind"] for g in front[-1].data["graphs"]] == ["inference"]


ARG_NEEDS_GRAD = """import torch


def step(x, w):
    return torch.tanh(x @ w).sum()


x = torch.randn(8, 4)
w = torch.randn(4, 3, requires_grad=True)
loss = torch.compile(step)(x, w)
loss.backward()
"""


def test_an_argument_that_needs_a_gradient_still_needs_it_in_capture(tmp_path: Path) -> None:
    """Regression: capture copied the arguments without `requires_grad`, so a weight passed
    as an argument gave an inference graph and no backward."""
    options = CompileOptions(profile=False)
    fw, bw = _forward_and_backward(ARG_NEEDS_GRAD, options, tmp_path)
    x = next(a for a in fw.example_inputs if a.shape == (8, 4))
    w = next(a for a in fw.example_inputs if a.shape == (4, 3))
    ref = w.detach().clone().requires_grad_(True)
    torch.tanh(x @ ref).sum().backward()
    saved = fw.compiled(*_fresh(fw.example_inputs))
    args = _fresh(bw.example_inputs)
    for out_index, in_index in saved_inputs(fw.gm, bw.gm):
        args[in_index] = saved[out_index]
    grads = [g for g in bw.compiled(*args) if g is not None]
    assert len(grads) == 1
    _close(grads[0], ref.grad, options, "grad of w")
