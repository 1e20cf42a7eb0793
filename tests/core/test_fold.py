"""Constant subgraphs folded at compile time (compiler/lowering/fold.py): what folds, what
does not, and the compiled values against eager."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from kernelscope.compiler.lowering.fold import FOLD_MAX_NUMEL, fold_constants


def _scale(x: torch.Tensor) -> torch.Tensor:
    # DeBERTa-v2's attention scale: computed from a tensor the graph holds
    scale = torch.sqrt(torch.tensor(16.0) * 2)
    return x / scale.to(x.dtype)


def _ops(gm: torch.fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_a_constant_only_chain_becomes_one_constant() -> None:
    gm = make_fx(_scale)(torch.randn(4))
    assert "aten.sqrt.default" in _ops(gm)
    notes = fold_constants(gm, "cpu")
    assert _ops(gm) == ["aten.div.Tensor"], _ops(gm)
    [const] = [n for n in gm.graph.nodes if n.op == "get_attr"]
    value = getattr(gm, str(const.target))
    assert value.dtype == torch.float32 and value.item() == pytest.approx(32 ** 0.5)
    assert any("compile time" in n for n in notes), notes
    x = torch.randn(4)
    torch.testing.assert_close(gm(x), _scale(x), rtol=0, atol=0)
    assert fold_constants(gm, "cpu") == []  # done once


def test_a_constant_read_on_another_device_moves_there() -> None:
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    gm = make_fx(_scale)(torch.empty(4, device="meta"))
    with FakeTensorMode():  # as where a backend compiles: the values stay real
        notes = fold_constants(gm, "meta")
    [const] = [n for n in gm.graph.nodes if n.op == "get_attr"]
    value = getattr(gm, str(const.target))
    assert value.device.type == "meta" and not isinstance(value, FakeTensor)
    assert any("moved from cpu to meta" in n for n in notes), notes


def test_random_big_and_input_reading_ops_are_not_folded() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        p = torch.full((8,), 0.5)
        big = torch.ones(FOLD_MAX_NUMEL + 1).cumsum(0)
        return torch.bernoulli(p) + x, big + 1, x * 2

    gm = make_fx(fn)(torch.randn(8))
    before = _ops(gm)
    fold_constants(gm, "cpu")
    after = _ops(gm)
    assert "aten.bernoulli.default" in after and "aten.cumsum.default" in after
    assert after.count("aten.mul.Tensor") == before.count("aten.mul.Tensor")


def test_compiled_values_match_eager() -> None:
    torch._dynamo.reset()
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    got = torch.compile(_scale, backend="kernelscope")(x)
    torch._dynamo.reset()
    torch.testing.assert_close(got, _scale(x), rtol=0, atol=0)
