"""The model zoo in CI: one CPU training step of each Hugging Face architecture in
tests/models/zoo_models.py, compiled, within the training suite's 3x rule of a float64
eager step (tests/models/zoo.py), and no model sending more ops to ATen than the
checked-in baseline (tests/models/zoo_fallbacks.json: an upper bound; lower it when a
model loses fallbacks, with `python tests/models/zoo_table.py --baseline`).

The models are dealt to SHARDS test classes: CI's `--dist loadscope` hands each class to
one worker, so the zoo spreads over the workers (a module would go to one).
"""

from __future__ import annotations

from typing import Any

import pytest
from zoo import baseline, row
from zoo_models import MODELS

pytest.importorskip("transformers")

SHARDS = 4
NAMES = list(MODELS)


def _shard(k: int) -> list[str]:
    return NAMES[k::SHARDS]


def _check(name: str) -> None:
    r: dict[str, Any] = row(name)
    assert r["ok"], f"{name}: beyond the rule on {r['failed']} (worst {r['worst']}x bound)"
    allowed = baseline()[name]
    assert r["fallbacks"] <= allowed, \
        f"{name}: {r['fallbacks']} ops on ATen, the baseline allows {allowed}: {r['by_op']}"


class TestZooShard0:
    @pytest.mark.parametrize("name", _shard(0))
    def test_step_within_the_rule_no_new_fallbacks(self, name: str) -> None:
        _check(name)


class TestZooShard1:
    @pytest.mark.parametrize("name", _shard(1))
    def test_step_within_the_rule_no_new_fallbacks(self, name: str) -> None:
        _check(name)


class TestZooShard2:
    @pytest.mark.parametrize("name", _shard(2))
    def test_step_within_the_rule_no_new_fallbacks(self, name: str) -> None:
        _check(name)


class TestZooShard3:
    @pytest.mark.parametrize("name", _shard(3))
    def test_step_within_the_rule_no_new_fallbacks(self, name: str) -> None:
        _check(name)


def test_the_zoo_spans_the_families_and_the_baseline_covers_it() -> None:
    assert len(MODELS) >= 30
    families = {f for family, _ in MODELS.values() for f in family.split()}
    for needed in ("encoder", "decoder", "encoder-decoder", "vision", "audio", "gqa",
                   "sliding", "alibi", "rotary", "moe"):
        assert needed in families, needed
    assert set(baseline()) == set(MODELS)
    assert sum(len(_shard(k)) for k in range(SHARDS)) == len(MODELS)
