"""Inductor's own output code, captured for the diff view (compiler/runtime/inductor.py),
and the `inductor` event: after our whole result, with each Inductor kernel timed."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from ks_schema import check_stream

from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline
from kernelscope.compiler.runtime.inductor import inductor_output, kernels_of


def test_inductor_output_code_is_captured_with_its_kernels() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + y)

    x, y = torch.randn(256), torch.randn(256)

    def build(graphs):
        torch._dynamo.reset()
        compiled = torch.compile(f, backend="inductor")
        return lambda: compiled(x, y)

    out, fn, modules = inductor_output(build)
    assert out["error"] is None and fn is not None
    # The module Inductor loaded, holding the kernel as the global its `call` looks up.
    [(module, names)] = modules
    assert names == [out["kernels"][0]["name"]] and callable(getattr(module, names[0]))
    assert len(out["code"]) == 1 and "def call(" in out["code"][0]
    [kernel] = out["kernels"]
    assert kernel["name"].startswith("cpp_fused_add_relu")
    assert kernel["language"] == "cpp" and 'extern "C"' in kernel["source"]
    torch.testing.assert_close(fn(), f(x, y))


def test_triton_kernels_are_cut_out_by_name() -> None:
    module = (
        "triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', '''\n"
        "import triton\n@triton.jit\ndef triton_poi_fused_add_0(in_ptr0, xnumel):\n"
        "    pass\n''', device_str='cuda')\n\n"
        "cpp_fused_mul_1 = async_compile.cpp_pybinding(['float*'], '''\nvoid kernel() {}\n''')\n"
    )
    kernels = kernels_of(module)
    assert [(k["name"], k["language"]) for k in kernels] == [
        ("triton_poi_fused_add_0", "python"),
        ("cpp_fused_mul_1", "cpp"),
    ]
    assert kernels[0]["source"].startswith("import triton\n@triton.jit")
    assert kernels[1]["source"] == "void kernel() {}\n"


ADD = ("import torch\n"
       "def f(x, y):\n"
       "    return (x + y).relu()\n"
       "example_inputs = (torch.randn(64, 32), torch.randn(32))\n")


def test_inductor_follows_our_whole_result_with_its_kernels_timed(tmp_path: Path) -> None:
    """`profile` (ours against eager) is complete without Inductor; the `inductor` event
    comes after it, before `done`, with Inductor's C++ kernel timed in place."""
    path = tmp_path / "snippet.py"
    path.write_text(ADD)
    options = CompileOptions(device="cpu", backend="cpp", inductor=True)
    events = [json.loads(e.to_json()) for e in run_pipeline(ADD, options, str(path))]
    check_stream(events)
    stages = [e["stage"] for e in events]
    assert stages[-3:] == ["profile", "inductor", "done"], stages
    profile, inductor = events[-3]["data"], events[-2]["data"]
    assert profile["measured"] and profile["kernelscope_ms"] is not None
    assert profile["inductor"] is None and profile["inductor_ms"] is None
    assert inductor["error"] is None and inductor["measured"] is True
    assert inductor["inductor_ms"] is not None and "def call(" in inductor["code"][0]
    [kernel] = inductor["kernels"]
    assert kernel["name"].startswith("cpp_fused") and isinstance(kernel["ms"], float)
    # Matched to ours by the FX nodes both cover: one kernel each, the same nodes.
    assert kernel["graph"] == 0 and sorted(kernel["nodes"]) == ["add", "relu"]
    assert kernel["bytes"] == (64 * 32 * 2 + 32) * 4
    [group] = inductor["groups"]
    ours = events[[e["stage"] for e in events].index("scheduling")]["data"]["graphs"][0]
    assert group["how"] == "same FX nodes" and group["b"] == [kernel["call"]]
    assert group["a"] == [k["name"] for k in ours["kernels"]] and group["graph"] == 0
    assert group["b_ms"] == kernel["ms"] and group["a_ms"] == profile["kernels"][0]["ms"]
    assert events[-2]["seq"] < events[-1]["seq"] and events[-1]["data"]["ok"] is True


def test_without_the_option_there_is_no_inductor_event(tmp_path: Path) -> None:
    path = tmp_path / "snippet.py"
    path.write_text(ADD)
    options = CompileOptions(device="cpu", backend="cpp", profile=False)
    stages = [e.stage for e in run_pipeline(ADD, options, str(path))]
    assert "inductor" not in stages and stages[-2:] == ["profile", "done"]
