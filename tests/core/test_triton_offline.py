"""Triton's own stages on a host without a GPU: a kernel the interpreter ran is compiled
offline for a GPU target (compiler/codegen/triton/offline.py), its TTIR..PTX and SASS
carried, with the same line maps as a GPU's build and marked with the target
(`gpu_target`: compiled for it, not run here), in the `gpu_stages` follow-up: after our own
result (it took 20 s of a job before `done`), never in the compile stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelscope.compiler.codegen.triton.offline import capability, describe_launch, offline_reports

REPO = Path(__file__).resolve().parents[2]


def _compile_events(sample: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope.compiler", "compile", str(REPO / "samples" / sample),
         "--device", "cpu", "--backend", "triton", "--json", "--no-profile",
         "--options", json.dumps(options)],
        capture_output=True, text=True, env=env, timeout=600, cwd=REPO, check=False)
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert events and events[-1]["stage"] == "done", proc.stderr[-3000:]
    return events


def _kernels(events: list[dict[str, Any]], stage: str = "compile") -> list[dict[str, Any]]:
    event = next(e for e in events if e["stage"] == stage)
    return [k for g in event["data"]["graphs"] for k in g["kernels"]]


@pytest.mark.skipif(capability("sm_90") is None, reason="unreachable")
def test_a_cpu_host_shows_a_triton_kernels_ptx_compiled_for_sm_90() -> None:
    events = _compile_events("softmax.py", {})
    assert events[-1]["data"]["ok"], events[-1]
    stages = [e["stage"] for e in events if e["stage"] != "progress"]  # less heartbeats
    assert stages[-3:] == ["profile", "gpu_stages", "done"], stages  # after our result
    (built,) = _kernels(events)  # the compile stage waits for none of it
    assert not built.get("ir") and "gpu_stages follow-up" in built["stages_note"]
    codegen = next(e for e in events if e["stage"] == "codegen")
    source = codegen["data"]["graphs"][0]["kernels"][0]["source"]
    (kernel,) = _kernels(events, "gpu_stages")
    assert kernel["name"] == built["name"]
    assert kernel["gpu_target"] == "sm_90"
    ir = kernel["ir"]
    for stage in ("ttir", "ttgir", "llir", "ptx"):
        assert ir.get(stage), stage
    assert ".target sm_90a" in ir["ptx"]
    assert f".entry {kernel['name']}(" in ir["ptx"]
    assert "tt.reduce" in ir["ttir"] or "tt.reduce" in ir["ttgir"]
    assert kernel["num_warps"] == 8 and kernel["registers"] > 0
    # Triton ships nvdisasm: SASS with its own line map
    assert "sass" in ir and "sass" in kernel["line_maps"]
    n_source = len(source.splitlines())
    for stage in ("ttir", "ttgir", "llir", "ptx", "sass"):
        spans = kernel["line_maps"][stage]
        assert spans, stage
        stage_lines = len(ir[stage].splitlines())
        for span in spans:
            assert 1 <= span["first"] <= span["last"] <= stage_lines
            assert all(1 <= n <= n_source for n in span["kernel_lines"]), (stage, span)
    # every line that does work is reached: the load, the reductions, the store
    lines = source.splitlines()
    for op in ("tl.load(", "tl.max(", "tl.sum(", "tl.store("):
        n = next(i for i, ln in enumerate(lines, 1) if op in ln)
        for stage in ("ttir", "llir", "ptx", "sass"):
            assert any(n in span["kernel_lines"] for span in kernel["line_maps"][stage]), \
                (op, stage)
    assert "ld.global" in ir["ptx"] and "LDG" in ir["sass"]


def test_the_offline_stages_are_a_follow_up_where_triton_is_interpreted() -> None:
    from kernelscope.compiler.codegen.triton.backend import TritonBackend
    from kernelscope.compiler.follow_ups import follow_ups
    from kernelscope.compiler.options import CompileOptions

    def asked(**kw: Any) -> list[str]:
        return follow_ups(CompileOptions.from_mapping({"device": "cpu", **kw}))

    assert asked(backend="triton") == ["gpu_stages"]
    assert asked(backend="triton", inductor=True) == ["inductor", "gpu_stages"]
    assert asked(backend="triton", gpu_target="") == []
    assert asked(backend="cpp") == [] and asked(backend="auto") == []
    # On a GPU the build's own stages and nvdisasm's SASS come after the result too.
    on_gpu = CompileOptions.from_mapping({"device": "cuda", "backend": "triton"})
    assert follow_ups(on_gpu) == ["gpu_stages"]
    assert "gpu_stages follow-up" in str(TritonBackend("cuda", on_gpu).reports_later())
    assert TritonBackend("cpu", CompileOptions(backend="triton", gpu_target="")
                         ).reports_later() is None


def test_gpu_target_off_says_why_there_are_no_stages() -> None:
    events = _compile_events("add_relu.py", {"gpu_target": ""})
    assert "gpu_stages" not in [e["stage"] for e in events]
    for kernel in _kernels(events):
        assert not kernel.get("ir") and kernel.get("gpu_target") is None
        assert "gpu_target option is off" in kernel["stages_note"]


def test_a_target_that_is_not_nvidias_is_refused_with_a_note() -> None:
    reports = offline_reports(Path("/nonexistent.py"), {"k": ((), {})}, "gfx942")
    assert capability("sm_80") == 80 and capability("sm_90a") == 90
    assert "not an NVIDIA target" in reports["k"]["stages_note"]


def test_a_launch_is_described_by_dtype_and_address() -> None:
    import torch

    x = torch.zeros(4, 8)
    view = x[1:]
    d = describe_launch(((x, view, 7, 0.5), {"XBLOCK": 8, "num_warps": 4}))
    assert d["args"][0] == {"dtype": "float32", "address": x.data_ptr()}
    assert d["args"][1]["address"] - x.data_ptr() == 32  # a view keeps its offset
    assert d["args"][2:] == [7, 0.5] and d["kwargs"] == {"XBLOCK": 8, "num_warps": 4}
