"""The text report (`kernelscope compile FILE` without --json) renders every stage."""

from __future__ import annotations

from pathlib import Path

from kernelscope.compiler.events.read import parse_event
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline
from kernelscope.compiler.report import render

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_text_report_renders_every_stage_of_a_cpp_compile() -> None:
    """Typed events carry every field (an empty `extern` on each buffer, null `atol`):
    the renderer used to take a present key for a filled one and failed on the lowering
    stage of every graph."""
    path = SAMPLES / "softmax.py"
    events = [parse_event(e.to_json()) for e in run_pipeline(path.read_text(), CompileOptions(
        device="cpu", backend="cpp"), str(path))]
    text = {e.stage: render(e) for e in events}
    assert "error" not in text and set(text) >= {"lowering", "codegen", "run", "done"}
    assert "-- buf0 reduction float32[128, 1]" in text["lowering"]
    # the C++ backend's softmax multiplies by 1/sum, and the lowering says so
    assert "reciprocal(" in text["lowering"] and "note: _softmax: exp(x - max) * (1 / sum)" \
        in text["lowering"]
    assert 'extern "C" void cpp_red_fused__softmax_0' in text["codegen"]
    assert "\nPASS against" in text["run"] and "(atol 0.0001, rtol 0.0001)" in text["run"]
    assert text["done"].endswith("\nok")


def test_every_stage_payload_has_a_renderer() -> None:
    from kernelscope.compiler.events.types import PAYLOADS
    from kernelscope.compiler.report import RENDER

    assert set(RENDER) == set(PAYLOADS.values())
