"""The sweep's rule for indices eager leaves open among ties (tied_indices.py): topk's
indices that pick another of two equal values pass; indices that pick a different value
fail, as do values that differ."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opinfo_harness import Mismatch, compare  # noqa: E402
from tied_indices import checker  # noqa: E402

ROW = torch.tensor([[1.0, 3.0, 3.0, 2.0], [4.0, 0.0, 4.0, 4.0]], dtype=torch.bfloat16)


def _sample(*args: object, **kwargs: object) -> SimpleNamespace:
    return SimpleNamespace(input=ROW, args=args, kwargs=kwargs)


def test_topk_indices_of_tied_values_may_differ_from_eager() -> None:
    eager = torch.topk(ROW, 2)
    ours = (eager.values, eager.indices.flip(-1))  # the two tied elements, other order
    assert not torch.equal(ours[1], eager.indices)
    compare(ours, tuple(eager), None, "values", indices=checker("topk", _sample(2)))


def test_topk_indices_that_select_another_value_fail() -> None:
    eager = torch.topk(ROW, 2)
    wrong = eager.indices.clone()
    wrong[0, 1] = 3  # the 2.0, not the other 3.0
    with pytest.raises(Mismatch, match="select other values"):
        compare((eager.values, wrong), tuple(eager), None, "values",
                indices=checker("topk", _sample(2)))


def test_values_are_still_compared() -> None:
    eager = torch.topk(ROW, 2)
    with pytest.raises(Mismatch):
        compare((eager.values + 1, eager.indices), tuple(eager), None, "values",
                indices=checker("topk", _sample(2)))


def test_kthvalue_and_mode_without_keepdim() -> None:
    for name, fn, args in (("kthvalue", torch.kthvalue, (3, 1, False)),
                           ("mode", torch.mode, (1, False))):
        eager = fn(ROW, *args)
        row1 = (ROW[1] == eager.values[1]).nonzero().flatten()  # the tied 4.0s of row 1
        other = row1[row1 != eager.indices[1]][0]
        ours = eager.indices.clone()
        ours[1] = other
        compare((eager.values, ours), tuple(eager), None, "values",
                indices=checker(name, _sample(*args)))
        ours[1] = 1  # the 0.0
        with pytest.raises(Mismatch):
            compare((eager.values, ours), tuple(eager), None, "values",
                    indices=checker(name, _sample(*args)))


def test_other_ops_have_no_tie_rule() -> None:
    assert checker("sort", _sample()) is None and checker("max", _sample(1)) is None
