"""scaled_dot_product_attention stays one fused op (the SDPA kernel, forward and backward)
instead of two GEMMs and a softmax over the (s x s) scores, in inference and training;
values and gradients match eager. On the CPU the op is ATen's flash kernel for the CPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from kernelscope.compiler.compile_fx import make_backend
from kernelscope.compiler.options import CompileOptions

SDPA_CPU = "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default("
SDPA_CPU_BACKWARD = "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward"


def _attention(q: Any, k: Any, v: Any, mask: Any = None, causal: bool = False) -> Any:
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal,
                                          scale=0.3) * 2.0


CASES = {
    "plain": {},
    "causal": {"causal": True},
    "float_mask": {"mask": "float"},
}


def _inputs(case: dict[str, Any], grad: bool) -> tuple[list[torch.Tensor], dict[str, Any]]:
    g = torch.Generator().manual_seed(0)
    qkv = [torch.randn(2, 3, 17, 8, generator=g).requires_grad_(grad) for _ in range(3)]
    kwargs: dict[str, Any] = {"causal": case.get("causal", False)}
    if case.get("mask") == "float":
        kwargs["mask"] = torch.randn(17, 17, generator=g)
    return qkv, kwargs


def _wrappers(sink: list[Any]) -> list[str]:
    return [c.path.read_text() for c in sink]


@pytest.mark.parametrize("name", sorted(CASES))
def test_inference_keeps_the_sdpa_call(name: str) -> None:
    (q, k, v), kwargs = _inputs(CASES[name], grad=False)
    sink: list[Any] = []
    torch._dynamo.reset()
    with torch.no_grad():
        fn = torch.compile(lambda q, k, v: _attention(q, k, v, **kwargs),
                           backend=make_backend(CompileOptions(backend="cpp"), sink=sink))
        got = fn(q, k, v)
        want = _attention(q, k, v, **kwargs)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    (wrapper,) = _wrappers(sink)
    assert SDPA_CPU in wrapper
    assert "bmm" not in wrapper and "softmax" not in wrapper


@pytest.mark.parametrize("name", sorted(CASES))
def test_training_keeps_the_sdpa_call_and_its_backward(name: str) -> None:
    (q, k, v), kwargs = _inputs(CASES[name], grad=True)
    sink: list[Any] = []
    torch._dynamo.reset()
    fn = torch.compile(lambda q, k, v: _attention(q, k, v, **kwargs),
                       backend=make_backend(CompileOptions(backend="cpp"), sink=sink))
    out = fn(q, k, v)
    grads = torch.autograd.grad(out.pow(2).sum(), (q, k, v))
    eq, ek, ev = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    want = _attention(eq, ek, ev, **kwargs)
    want_grads = torch.autograd.grad(want.pow(2).sum(), (eq, ek, ev))
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    for got_g, want_g in zip(grads, want_grads):
        torch.testing.assert_close(got_g, want_g, atol=1e-5, rtol=1e-5)
    forward, backward = _wrappers(sink)
    assert SDPA_CPU in forward and SDPA_CPU_BACKWARD in backward
    assert not any("bmm" in w or "softmax" in w for w in (forward, backward))
