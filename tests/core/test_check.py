"""The run stage's comparison: count, dtype, device, shape, per-dtype tolerances."""

from __future__ import annotations

import torch

from kernelscope.compiler.check import compare_outputs, tolerance
from kernelscope.compiler.options import CompileOptions

OPTS = CompileOptions()


def test_dtype_shape_and_count_mismatches_fail() -> None:
    x = torch.randn(8)
    assert compare_outputs([x.clone()], [x], OPTS)["ok"]
    result = compare_outputs([x.double()], [x], OPTS)
    assert not result["ok"] and "dtype" in result["outputs"][0].error
    assert not compare_outputs([x.view(2, 4)], [x], OPTS)["ok"]
    result = compare_outputs([x], [x, x], OPTS)
    assert not result["ok"] and "1 outputs" in result["outputs"][-1].error
    assert not compare_outputs([torch.arange(3) + 1], [torch.arange(3)], OPTS)["ok"]


def test_tolerances_follow_the_dtype() -> None:
    assert tolerance(torch.float32, OPTS) == (OPTS.atol, OPTS.rtol)
    assert tolerance(torch.float64, OPTS) == (1e-7, 1e-7)
    x = torch.randn(100, dtype=torch.float64)
    assert not compare_outputs([x + 1e-6], [x], OPTS)["ok"]  # fine for float32, not 64
    h = torch.randn(100).half()
    assert compare_outputs([(h.float() * (1 + 4e-4)).half()], [h], OPTS)["ok"]
