"""The comparison helpers themselves fail when they should."""

from __future__ import annotations

import pytest
import torch
from ks_helpers import assert_same, reference


def test_count_dtype_shape_and_values_are_checked() -> None:
    x = torch.randn(8)
    assert_same((x.clone(),), [x])
    with pytest.raises(AssertionError, match="outputs"):
        assert_same((x, x), [x])
    with pytest.raises(AssertionError, match="dtype"):
        assert_same((x.double(),), [x])
    with pytest.raises(AssertionError, match="shape"):
        assert_same((x.view(2, 4),), [x])
    with pytest.raises(AssertionError):
        assert_same((x + 1e-4,), [x])  # float32 is compared at 1e-5
    with pytest.raises(AssertionError):
        assert_same((x.double() + 1e-6,), [x.double()])  # float64 at 1e-7
    i = torch.arange(5)
    with pytest.raises(AssertionError):
        assert_same((i + 1,), [i])  # integers exactly


def test_low_precision_is_compared_with_a_float32_reference() -> None:
    x = torch.randn(4096).half()

    def f(t: torch.Tensor) -> torch.Tensor:
        return (t + 1000) - 1000  # rounds to steps of 0.5 in float16, not in float32

    eager, ref = reference(f, (x,))
    assert eager[0].dtype == ref[0].dtype == torch.float16
    assert not torch.equal(eager[0], ref[0])
    assert_same((f(x.float()).half(),), eager, ref)  # computing in float32, rounded once
    with pytest.raises(AssertionError):
        assert_same((eager[0],), eager, ref)  # eager's own rounding is not the reference
