"""The model training suite on the CPU: tiny HF GPT-2, BERT, Llama and ViT and an nn
ResNet, one training step each (loss, every gradient, one AdamW step) compiled vs eager,
both judged against a float64 reference (tests/models/training_suite.py). Also: a compiled
training loop with optimizer.step() inside, and dropout in train mode."""

from __future__ import annotations

import copy

import pytest
import torch
from training_suite import FLOOR, LR, MULTIPLE, TINY, check, rms, tiny

pytest.importorskip("transformers")


@pytest.mark.parametrize("name", TINY)
def test_training_step_matches_fp64_as_eager_does(name: str) -> None:
    rows = check(tiny(name))
    assert len(rows) > 3
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad[:5]


def test_compiled_loop_with_adamw_step() -> None:
    """optimizer.step() compiled inside the loop: three steps, run beside eager and a
    float64 loop; each parameter after them as near the float64 one as the training rule
    asks (MULTIPLE x eager's rms error + FLOOR). Closeness to eager alone failed on an AVX2
    host where ours was the nearer one: an element 1.02e-5 from eager's, 3.5e-6 from
    float64's, eager's 1.4e-5 from it."""
    case = tiny("gpt2")
    eager, ours = case.model.train(), copy.deepcopy(case.model).train()
    wide = copy.deepcopy(case.model).double().train()
    opts = {id(m): torch.optim.AdamW(m.parameters(), lr=LR) for m in (eager, ours, wide)}

    def step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> torch.Tensor:
        opt.zero_grad()
        loss = model(**case.inputs).loss
        loss.backward()
        opt.step()
        return loss.detach()

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="kernelscope")
    for _ in range(3):
        le, lo = step(eager, opts[id(eager)]), compiled(ours, opts[id(ours)])
        step(wide, opts[id(wide)])
        assert lo.dtype == torch.float32 and lo.shape == ()
        torch.testing.assert_close(lo, le, atol=1e-5, rtol=1e-5)
    width = case.model.config.n_embd
    named = zip(eager.named_parameters(), ours.named_parameters(), wide.named_parameters(),
                strict=True)
    for (n, pe), (_, po), (_, pw) in named:
        assert po.dtype == torch.float32 and po.shape == pe.shape, n
        pe, po = pe.detach().double(), po.detach().double()
        if n.endswith("attn.c_attn.bias"):
            # The key projection's bias (the middle third): softmax ignores a per-row
            # constant, so its gradient is rounding noise on every side, and Adam steps
            # each element by about +-lr whichever way the noise points. Its steps are
            # bounded by 2 * lr each; the query and value thirds are judged as the rest.
            key = slice(width, 2 * width)
            assert ((po[key] - pw[key]).abs() <= 3 * 2 * LR * (1 + 1e-6)).all(), n
            pe, po, pw = (torch.cat([t[:width], t[2 * width:]]) for t in (pe, po, pw))
        bound = MULTIPLE * rms(pe - pw) + FLOOR * rms(pw)
        assert rms(po - pw) <= bound, (n, rms(po - pw), bound)


def test_dropout_in_train_mode_runs() -> None:
    """Dropout draws differ from eager's (another RNG stream): shapes and finiteness."""
    import transformers as tf

    cfg = tf.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                        intermediate_size=128, vocab_size=128, max_position_embeddings=64)
    torch.manual_seed(0)
    model = tf.BertForMaskedLM(cfg).train()
    ids = torch.randint(0, 128, (2, 32))

    def step(m: torch.nn.Module) -> torch.Tensor:
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach()

    torch._dynamo.reset()
    loss = torch.compile(step, backend="kernelscope")(model)
    assert loss.shape == () and torch.isfinite(loss)
    for n, p in model.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, n
        assert torch.isfinite(p.grad).all(), n
