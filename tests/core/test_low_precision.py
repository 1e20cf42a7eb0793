"""The option low_precision (Triton): "round" (the default) rounds each float16/bfloat16
op's result as eager does; "fused" rounds a value only where it is stored, keeping it in
float32 inside the kernel (Inductor's default). GPT-2's bfloat16 GELU backward rounded 40
times per element where its loads and stores need 3 conversions, its forward 9 times."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from ks_helpers import interpreter_case_results, lower_fn
from low_precision_cases import gelu_new

from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.codegen.triton.kernel import generate_triton
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.scheduler import schedule

HERE = Path(__file__).resolve().parent


def _rounds(fused: bool) -> list[int]:
    """Conversions to bfloat16 in each kernel of GPT-2's GELU, generated for a GPU."""
    (_, lowered), = lower_fn(gelu_new, torch.randn(64, 96).to(torch.bfloat16))
    s = schedule(lowered, choose_backend("triton", "cpu", CompileOptions()))
    return [len(re.findall(r"\.to\(tl\.bfloat16\)", generate_triton(
        st.plan, [], 4096, fused_casts=fused).source)) for st in s.steps if st.plan is not None]


def test_fused_rounds_only_what_is_stored() -> None:
    rounded, fused = _rounds(False), _rounds(True)
    assert rounded == [8], rounded  # every bfloat16 op of the chain
    assert fused == [1], fused  # the store


def test_the_option_is_checked() -> None:
    backend = choose_backend("triton", "cpu", CompileOptions(low_precision="half"))
    with pytest.raises(ValueError, match="low_precision must be round or fused"):
        backend.generate(None, [])  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["fused", "round"])
def test_both_are_as_close_to_float64_as_eager(mode: str) -> None:
    results = interpreter_case_results(HERE / "low_precision_cases.py", "triton", mode)
    assert results == {"gelu_new": "ok", "gelu_new_grad": "ok"}, results


def test_a_stored_value_is_read_back_as_stored() -> None:
    """h = x + b saved (a forward's activation) and GELU(h) beside it: with "fused", GELU
    reads h rounded, as the backward that loads h does."""
    def fn(x: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + b
        return h, gelu_new(h)

    (_, lowered), = lower_fn(fn, torch.randn(64, 96).to(torch.bfloat16),
                             torch.randn(96).to(torch.bfloat16))
    (step,) = schedule(lowered, choose_backend("triton", "cpu", CompileOptions())).steps
    assert step.plan is not None
    src = generate_triton(step.plan, [], 4096, fused_casts=True).source
    stored = re.search(r"tl\.store\(out_ptr0 \+ \(xindex\), (tmp\d+)", src)
    assert stored is not None, src
    assert re.search(rf"= {stored.group(1)}\.to\(tl\.float32\)\n", src), src
    assert len(re.findall(r"\.to\(tl\.bfloat16\)", src)) == 2, src
