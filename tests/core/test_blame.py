"""Issue 30, origin: no snippet text wears the compiler's label, and a compiler failure does.

The snippet runs in the process that writes the capture bundle, so it can put any
allow-listed op in a graph, an assert with a message of its choosing included. Here the
bundle is edited after the front half, as such a snippet would. Each event goes through the
server's StageOrigin, as a job's back half does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelscope.compiler.blame import CUT, cut
from kernelscope.compiler.capture.bundle import ASSERT_TEXT, read_bundle
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_back, run_front
from kernelscope.server.jobs.trust import StageOrigin

OPTS = CompileOptions(device="cpu", backend="cpp", profile=False)
MSG = "Kernelscope C++ backend miscompiled this graph"
ADD = ("import torch\n"
       "def f(x, y):\n"
       "    return (x + y).relu()\n"
       "example_inputs = (torch.randn(8, 4), torch.randn(4))\n")


def _front(tmp_path: Path, code: str = ADD) -> Path:
    path = tmp_path / "snippet.py"
    path.write_text(code)
    bundle = tmp_path / "capture.ksb"
    list(run_front(code, OPTS, bundle, str(path)))
    return bundle


def _tamper(bundle: Path, edit: Any) -> None:
    raw = torch.load(bundle, weights_only=True)
    manifest = json.loads(raw["manifest"])
    edit(manifest)
    raw["manifest"] = json.dumps(manifest)
    torch.save(raw, bundle)


def _labelled(bundle: Path, code: str = ADD) -> list[tuple[str, str, dict[str, Any]]]:
    """(stage, origin, data) of each event, labelled as the server labels a back half's."""
    by_stage = StageOrigin()
    out = []
    for e in run_back(bundle, OPTS, replay_source=False, code=code):
        out.append((e.stage, by_stage.origin(e.stage, e.data), e.data))
    return out


def _node(name: str, target: str, args: list[Any]) -> dict[str, Any]:
    return {"name": name, "op": "call_function", "target": target, "args": args,
            "kwargs": {}, "meta": {"val": None, "stack_trace": None, "module_stack": []}}


def _plant_assert(m: dict[str, Any]) -> None:
    """An assert that fails on the captured inputs, with the snippet's message."""
    nodes = m["graphs"][0]["nodes"]
    first = next(n["name"] for n in nodes if n["op"] == "placeholder")
    nodes[-1:-1] = [_node("big", "aten.gt.Scalar", [{"node": first}, 1000.0]),
                    _node("any_big", "aten.any.default", [{"node": "big"}]),
                    _node("check", "aten._assert_async.msg", [{"node": "any_big"}, MSG])]


def test_an_assert_planted_in_the_bundle_is_never_the_compilers_word(tmp_path: Path) -> None:
    bundle = _front(tmp_path)
    _tamper(bundle, _plant_assert)
    errors = [(origin, data) for stage, origin, data in _labelled(bundle) if stage == "error"]
    assert len(errors) == 1
    origin, data = errors[0]
    said = json.dumps(data)
    assert MSG not in said, data
    assert origin == "snippet" and data["kind"] == "graph", (origin, data)


def test_assert_messages_are_dropped_when_the_bundle_is_rebuilt(tmp_path: Path) -> None:
    bundle = _front(tmp_path)
    _tamper(bundle, _plant_assert)
    (_, gm, _), = read_bundle(bundle).rebuild()
    check = next(n for n in gm.graph.nodes if n.name == "check")
    assert check.args[1] == ASSERT_TEXT and MSG not in gm.code


def test_a_planted_codegen_bug_stays_the_compilers(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A real compiler failure (our C++ made invalid) is labelled the compiler's, and so is
    an exception our own codegen raises: only the graph's own failure moves the label."""
    from kernelscope.compiler.codegen.cpp import kernel as cpp

    bundle = _front(tmp_path)
    monkeypatch.setitem(cpp.OPS.rules, "relu", "planted_undefined_function({0})")
    errors = [(o, d) for s, o, d in _labelled(bundle) if s == "error"]
    assert [(o, d["kind"], d["stage"]) for o, d in errors] == [("compiler", "build", "compile")]
    assert "planted_undefined_function" in (errors[0][1].get("log") or "") + \
        (errors[0][1].get("traceback") or "") + errors[0][1]["message"]


def test_an_exception_in_our_codegen_stays_the_compilers(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.compiler import pipeline

    def broken(work: Any) -> Any:
        raise RuntimeError("planted codegen bug")

    bundle = _front(tmp_path)
    stages = tuple((n, pipeline._per_graph(broken, pipeline.ev.Codegen) if n == "codegen"
                    else fn) for n, fn in pipeline.BACK_STAGES)
    monkeypatch.setattr(pipeline, "BACK_STAGES", stages)
    errors = [(o, d) for s, o, d in _labelled(bundle) if s == "error"]
    assert [(o, d["kind"]) for o, d in errors] == [("compiler", "exception")]
    assert "planted codegen bug" in errors[0][1]["message"]


def test_kernel_comments_quote_the_submitted_code_never_the_bundles(tmp_path: Path) -> None:
    bundle = _front(tmp_path)
    forged = "\n".join(["# VERIFIED BY KERNELSCOPE: 1000x faster"] * 6)

    def edit(m: dict[str, Any]) -> None:
        m["events"]["source"]["data"]["code"] = forged

    _tamper(bundle, edit)
    codegen = next(d for s, _, d in _labelled(bundle) if s == "codegen")
    text = json.dumps(codegen)
    assert "VERIFIED" not in text
    assert "return (x + y).relu()" in text


def test_a_compiler_message_quoting_a_graph_string_has_it_cut() -> None:
    assert cut("bad mode 'VERIFIED BY KERNELSCOPE' here", ["VERIFIED BY KERNELSCOPE"]) == \
        f"bad mode '{CUT}' here"
