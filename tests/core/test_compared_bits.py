"""Sorts compare a tensor's elements with each other, and each element must be the same
bits in every comparison (lowering/common.py `compared`, schedule/fusion.py).

Regression: with gradients required, a value saved for backward (exp's output, softmax's)
was stored by a kernel that also ranked it for topk, recomputing it per comparison: a
vector lane's exp (libmvec) against the scalar one of the same element, one ulp apart, so
an element sorted before itself and a rank went missing (index -1). Mixtral's router
(softmax, top-2) picked other experts for 5 of 64 tokens, and the MoE block's output was
55% off eager; in eval under no_grad it matched.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from ks_helpers import compiled

SORTS: dict[str, Callable[[torch.Tensor], Any]] = {
    "topk": lambda x: torch.topk(x.exp(), 3, -1),
    "sort": lambda x: torch.sort(x.exp(), -1),
    "kthvalue": lambda x: torch.kthvalue(x.exp(), 3, -1),
    "median": lambda x: torch.median(x.exp(), -1),
    "softmax_top2": lambda x: torch.topk(torch.softmax(x, -1), 2, -1),
}


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", sorted(SORTS))
def test_a_sort_of_a_saved_value_picks_eagers_elements(name: str, grad: bool) -> None:
    fn = SORTS[name]
    torch.manual_seed(0)
    x = torch.randn(64, 8, requires_grad=grad)
    values, indices = fn(x)
    got_values, got_indices = compiled(fn, backend="cpp")(x)
    assert torch.equal(got_indices, indices), int((got_indices != indices).sum())
    torch.testing.assert_close(got_values, values, atol=1e-5, rtol=1e-5)


def test_the_scheduler_says_why_the_sorted_value_is_not_recomputed(tmp_path: Path) -> None:
    """The refusal is a fusion decision the UI shows, with its reason."""
    compiled(SORTS["topk"], backend="cpp", trace_dir=str(tmp_path))(torch.randn(8, 4))
    stages = json.loads(next(tmp_path.glob("*.json")).read_text())["stages"]
    stored = [b for b in stages["lowering"]["buffers"]
              if b["realized"] == "compared element by element: stored once"]
    assert len(stored) == 1 and stored[0]["origins"] == ["exp"], stages["lowering"]["buffers"]
    reasons = [d["reason"] for d in stages["scheduling"]["decisions"] if not d["fused"]]
    assert any(f"compares the elements of {stored[0]['name']}" in r for r in reasons), reasons


def test_mixtral_moe_block_trains_as_eager() -> None:
    """The block of the report: output and every gradient as eager's (float32 both)."""
    tf = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = tf.MixtralConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           num_local_experts=4, num_experts_per_tok=2)
    eager = tf.MixtralForCausalLM(cfg).model.layers[0].mlp.train()
    ours = copy.deepcopy(eager)
    x = torch.randn(2, 32, 64)
    cot = torch.randn(2, 32, 64)
    xe, xo = x.clone().requires_grad_(), x.clone().requires_grad_()
    out_e = eager(xe)
    torch._dynamo.reset()
    out_o = torch.compile(ours, backend="kernelscope", options={"backend": "cpp"})(xo)
    out_e.backward(cot)
    out_o.backward(cot)
    pairs = [("output", out_o, out_e), ("input grad", xo.grad, xe.grad)]
    pairs += [(n, po.grad, pe.grad) for (n, pe), (_, po) in
              zip(eager.named_parameters(), ours.named_parameters())]
    for name, got, want in pairs:
        assert got is not None and want is not None, name
        rel = float((got - want).norm() / want.norm())
        assert rel < 1e-5, f"{name}: {rel:.3g} off eager (relative norm)"
