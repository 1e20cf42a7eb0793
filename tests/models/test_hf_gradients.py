"""One `loss.backward()` of tiny Hugging Face GPT-2 and BERT (random init, eval mode)
compiled with the backend: every parameter's gradient as eager's, to 1e-4 relative norm
(plus 1e-6 * sqrt(numel) absolute, for gradients that are zero in exact arithmetic, like
BERT's key bias). Before the CPU attention fixes (tests/core/test_attention_training.py)
the first layer's gradients were off by ~2e3 relative."""

from __future__ import annotations

import copy
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")


def _gpt2() -> torch.nn.Module:
    cfg = transformers.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1000,
                                  n_positions=256, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(cfg)


def _bert() -> torch.nn.Module:
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4,
                                  intermediate_size=1024, vocab_size=1000,
                                  max_position_embeddings=256)
    return transformers.BertForMaskedLM(cfg)


@pytest.mark.parametrize("make", [_gpt2, _bert], ids=["gpt2", "bert"])
def test_hf_backward_gradients_match_eager(make) -> None:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    eager = make().eval()
    ours = copy.deepcopy(eager)
    ids = torch.randint(0, 1000, (2, 128))

    def step(model: torch.nn.Module) -> torch.Tensor:
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach()

    le = step(eager)
    torch._dynamo.reset()
    lo = torch.compile(step, backend="kernelscope")(ours)
    torch.testing.assert_close(lo, le, atol=1e-5, rtol=1e-5)
    wrong = []
    for (name, pe), (_, po) in zip(eager.named_parameters(), ours.named_parameters()):
        assert pe.grad is not None and po.grad is not None, name
        err = float((po.grad - pe.grad).norm())
        if err > 1e-4 * float(pe.grad.norm()) + 1e-6 * math.sqrt(pe.numel()):
            wrong.append(f"{name}: {err / (float(pe.grad.norm()) + 1e-30):.2e}")
    assert not wrong, wrong
