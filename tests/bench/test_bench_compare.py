"""The benchmark's check of one output against eager (benchmarks/measure.py `compare`)."""

from __future__ import annotations

import torch
from torch import nn

from benchmarks.measure import _float32_reference, compare


def test_elementwise_miss_is_forgiven_only_when_as_close_to_the_precise_reference() -> None:
    torch.manual_seed(0)
    exact = torch.randn(1000, dtype=torch.float64)
    eager = exact + 1e-2 * torch.randn(1000, dtype=torch.float64)  # eager's own rounding
    eager_err = (eager - exact).norm().item() / exact.norm().item()
    close = exact + 1e-2 * torch.randn(1000, dtype=torch.float64)
    close[0] = eager[0] + 0.2  # one element far from eager's
    far = exact + 5e-2 * torch.randn(1000, dtype=torch.float64)
    far[0] = eager[0] + 0.2

    plain = compare(close, eager, 0.05)
    assert not plain["ok"] and "max abs err" in plain["why"]
    judged = compare(close, eager, 0.05, exact, eager_err)
    assert judged["ok"] and "as close to float32 as eager" in judged["why"]
    assert not compare(far, eager, 0.05, exact, eager_err)["ok"]
    nan = close.clone()
    nan[1] = float("nan")
    assert not compare(nan, eager, 0.05, exact, eager_err)["ok"]


def test_float32_reference_only_for_bf16_models() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 4))
    x = torch.randn(8, 16)
    assert _float32_reference(model, x, model(x)) is None
    bf16 = model.to(torch.bfloat16)
    xb = x.to(torch.bfloat16)
    ref32, err = _float32_reference(bf16, xb, bf16(xb))
    assert ref32.dtype == torch.float64 and ref32.shape == (8, 4)
    assert 0 < err < 0.05
    assert next(bf16.parameters()).dtype == torch.bfloat16  # the model itself untouched
