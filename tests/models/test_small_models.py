"""Small BERT / GPT-2 / Llama / ViT / ResNet / ResNeXt stacks through the backend on the CPU:
inference matches eager, and one training step of the GPT-2 stack gives eager's gradients."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from small_models import NAMES, make


def _compiled(fn):  # type: ignore[no-untyped-def]
    from kernelscope.compiler import backend

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend)


@pytest.mark.parametrize("name", NAMES)
def test_inference_matches_eager(name: str) -> None:
    model, inp = make(name)
    with torch.no_grad():
        expected = model(inp)
        got = _compiled(model)(inp)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["llama", "vit", "resnext"])
def test_reference_interpreter_matches_eager(name: str) -> None:
    """The lowered graphs, run by the reference interpreter, whose unmasked loads must stay
    inside their buffers (the rotary cat read its last part at negative offsets)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
    from ks_helpers import lower_fn

    model, inp = make(name)
    with torch.no_grad():
        expected = model(inp)
    got = lower_fn(model, inp, interpret=True)
    got = got[0] if isinstance(got, (list, tuple)) else got
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_gpt2_training_step_gradients() -> None:
    eager, inp = make("gpt2")
    ours, _ = make("gpt2")
    eager.train()
    ours.train()
    target = torch.randint(0, 512, inp.shape)

    def step(model: torch.nn.Module) -> torch.Tensor:
        logits = model(inp)
        loss = F.cross_entropy(logits.flatten(0, 1), target.flatten())
        loss.backward()
        return loss

    le = step(eager)
    lo = _compiled(step)(ours)
    torch.testing.assert_close(lo, le, atol=1e-5, rtol=1e-5)
    for (n, pe), (_, po) in zip(eager.named_parameters(), ours.named_parameters()):
        assert po.grad is not None, n
        torch.testing.assert_close(po.grad, pe.grad, atol=1e-4, rtol=1e-3, msg=n)
