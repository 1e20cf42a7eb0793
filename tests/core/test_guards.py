"""Guards and recompiles in the capture stage (compiler/capture/guards.py): every Dynamo
frame compile of the snippet's calls is its own entry, with its guards in words and, for a
recompile, the guard failure that caused it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import shared_snippets
from shared_snippets import recompiles

from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline

SNIPPET = recompiles("cf(torch.randn(64, 2))", "cf(torch.randn(64, 2, dtype=torch.float64))",
                     "with torch.no_grad():", "    cf(torch.randn(64, 2, dtype=torch.float64))")


def capture(code: str, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "snippet.py"
    path.write_text(code)
    events = list(run_pipeline(code, CompileOptions(profile=False), str(path)))
    assert events[-1].data["ok"], [e.data for e in events if e.stage == "error"]
    return next(e.data for e in events if e.stage == "capture")


@pytest.fixture(scope="module")
def recompiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return capture(SNIPPET, tmp_path_factory.mktemp("guards"))


def test_every_call_that_recompiles_is_its_own_entry_with_dynamos_reason(
    recompiles: dict[str, Any],
) -> None:
    compiles = recompiles["compiles"]
    assert [c["compile_id"] for c in compiles] == ["0/0", "0/1", "0/2", "0/3", "0/4"]
    assert [c["call"] for c in compiles] == [0, 1, 2, 3, 4]
    assert [c["recompile"] for c in compiles] == [False, True, True, True, True]
    assert compiles[0]["reasons"] == []
    assert compiles[1]["reasons"] == ["tensor 'x' size mismatch at index 0. expected 16, actual 32"]
    assert "tensor 'x' rank mismatch. expected 1, actual 2" in compiles[2]["reasons"]
    assert any("dtype mismatch" in r for r in compiles[3]["reasons"])
    assert compiles[4]["reasons"] == ["GLOBAL_STATE changed: grad_mode"]
    assert [c["grad_mode"] for c in compiles] == [True, True, True, True, False]
    assert compiles[2]["inputs"][0]["shape"] == [64, 2]
    assert all(c["function"] == "f" and c["line"] == 4 for c in compiles)


def test_guards_read_as_text_and_point_at_the_user_line(recompiles: dict[str, Any]) -> None:
    first = recompiles["compiles"][0]["guards"]
    tensor = next(g for g in first if g["kind"] == "TENSOR_MATCH")
    assert tensor["text"] == "x: Tensor float32[16], stride [1], requires_grad=False"
    assert tensor["line"] == 5
    assert any(g["text"].startswith("global state unchanged: grad_mode=True") for g in first)
    dynamic = recompiles["compiles"][1]["guards"]
    assert any(g["kind"] == "SHAPE" and g["text"] == "2 <= x.size()[0]" for g in dynamic)
    assert "TREE_GUARD_MANAGER" in recompiles["compiles"][0]["raw"]


def test_one_call_reports_its_guards(tmp_path: Path) -> None:
    code = "import torch\n\n\ndef g(x):\n    return x.sin() * 2\n\n\n"
    code += "example_inputs = (torch.randn(8),)\n"
    data = capture(code, tmp_path)
    assert [c["compile_id"] for c in data["compiles"]] == ["0/0"]
    assert data["compiles"][0]["recompile"] is False
    assert any(g["kind"] == "TENSOR_MATCH" for g in data["compiles"][0]["guards"])
    assert [g["dynamo_graph"] for g in data["graphs"]] == [0]


def test_the_recorder_names_forward_backward_and_inference_graphs() -> None:
    import torch

    from kernelscope.compiler.capture.dynamo import Recorder

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x @ w).tanh().sum()

    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    kinds = []
    for grad, weight in ((True, w), (False, w), (True, w.detach())):
        torch._dynamo.reset()
        recorder = Recorder()
        with torch.set_grad_enabled(grad):
            out = torch.compile(step, backend=recorder.backend)(x, weight)
        if out.requires_grad:
            out.backward()
        kinds.append([g.kind for g in recorder.graphs])
    assert kinds == [["forward", "backward"], ["inference"], ["inference"]]


def test_every_call_is_listed_with_what_ran_it(tmp_path: Path) -> None:
    """The third call of a recompiling function (size 64 after 16 and 32) compiles nothing:
    it runs the dynamic compile 0/1. It used to be mentioned nowhere; now every call is
    listed, a call that reused a compile says which, and each later recompile its reason."""
    code = shared_snippets.recompiles("cf(torch.randn(64))", "cf(torch.randn(8, 2))",
                                      "cf(torch.randn(128))")
    data = capture(code, tmp_path)
    calls = data["calls"]
    assert [c["call"] for c in calls] == [0, 1, 2, 3, 4]
    assert [(c["compiled"], c["compile_ids"]) for c in calls] == [
        (True, ["0/0"]), (True, ["0/1"]), (False, ["0/1"]), (True, ["0/2"]), (False, ["0/1"])]
    assert calls[2]["inputs"][0]["shape"] == [64] and calls[2]["failed"] == []
    assert calls[3]["failed"] == ["0/1", "0/0"]  # the guards the 2-d call failed
    compiles = data["compiles"]
    assert [c["compile_id"] for c in compiles] == ["0/0", "0/1", "0/2"]
    assert "tensor 'x' rank mismatch. expected 1, actual 2" in compiles[2]["reasons"]
