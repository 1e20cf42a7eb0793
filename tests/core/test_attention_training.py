"""Gradients through CPU attention (`_scaled_dot_product_flash_attention_for_cpu`), the two
bugs that made every gradient of Hugging Face GPT-2 and BERT below their last layer wrong.

1. Upstream's decomposition of the CPU flash op returns the attention weights where the op
   returns its logsumexp. Decompositions apply below autograd, so the backward op
   (`..._for_cpu_backward`) was handed that (b, h, l, s) tensor as its (b, h, l) logsumexp:
   q, k and v gradients off by ~1e3 relative. The op now stays whole (an extern call).
2. The op lays its output out in the query's dim order. A query the graph had already
   stored in another order than eager's (here: contiguous, because it is also a graph
   output, where eager has a strided view of the qkv projection) got an output buffer
   planned with eager's strides, and everything after read it transposed. Extern output
   strides are now the op's meta on the inputs as stored (lowering/extern_layout.py).
3. The op reads its inputs' last dim as contiguous whatever their strides. A convolution
   graph laid out channels-last stores every 4-D value downstream of the convolution NHWC,
   attention's (batch, heads, tokens, head dim) among them: a ViT's loss and every gradient
   were wrong. Such inputs are now copied into eager's dim order first.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from ks_helpers import compiled


def _attention(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    b, t, d = x.shape
    q, k, v = F.linear(x, w, bias).split(d, 2)  # the bias add makes q a computed value
    q, k, v = (z.view(b, t, 4, d // 4).transpose(1, 2) for z in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).reshape(b, t, d), q


def _gradients_match_eager(**options: Any) -> None:
    """The attention's x and w gradients, compiled with `options`, against eager's."""
    torch.manual_seed(0)
    x = torch.randn(2, 16, 32, requires_grad=True)
    w = torch.randn(96, 32, requires_grad=True)
    bias = torch.randn(96)

    def loss(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (_attention(x, w, bias)[0] ** 2).sum()

    loss(x, w).backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    compiled(loss, **options)(x2, w2).backward()
    assert x2.grad is not None and w2.grad is not None
    torch.testing.assert_close(x2.grad, x.grad, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(w2.grad, w.grad, atol=1e-4, rtol=1e-4)


def test_flash_attention_cpu_gradients_match_eager() -> None:
    _gradients_match_eager()


def test_flash_attention_cpu_output_follows_the_stored_query() -> None:
    """The query is also returned, so it is stored contiguous, not in eager's order."""
    torch.manual_seed(0)
    x, w, bias = torch.randn(2, 16, 32), torch.randn(96, 32), torch.randn(96)
    with torch.no_grad():
        expected = _attention(x, w, bias)
        got = compiled(_attention)(x, w, bias)
    assert len(got) == 2
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


def test_flash_attention_cpu_inputs_after_a_channels_last_convolution() -> None:
    """A patch embedding (the convolution makes the graph channels-last) before attention:
    q, k and v are 4-D values downstream of it, once stored NHWC (head dim strided)."""
    torch.manual_seed(0)
    conv_w, conv_b = torch.randn(32, 3, 4, 4, requires_grad=True), torch.randn(32)
    w, bias = torch.randn(96, 32, requires_grad=True), torch.randn(96)
    images = torch.randn(2, 3, 16, 16)

    def loss(conv_w: torch.Tensor, w: torch.Tensor, layout: Any = None) -> torch.Tensor:
        x = images if layout is None else images.contiguous(memory_format=layout)
        tokens = F.conv2d(x, conv_w, conv_b, stride=4).flatten(2).transpose(1, 2)
        return (_attention(tokens, w, bias)[0] ** 2).sum()

    # The reference is eager in the layout the compiler picks: ATen's kernels sum in
    # another order on channels-last tensors (on an AVX2 host the gradients, about 3e4,
    # moved by 16 from eager's contiguous run), where the bug this guards against misread
    # whole heads.
    want = loss(conv_w, w, torch.channels_last)
    want.backward()
    cw, w2 = conv_w.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    got = compiled(loss, conv_layout="channels_last", backend="cpp")(cw, w2)
    got.backward()
    torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(cw.grad, conv_w.grad, atol=1e-3, rtol=1e-4)
    torch.testing.assert_close(w2.grad, w.grad, atol=1e-3, rtol=1e-4)


def test_saved_attention_inputs_and_output_are_not_copied_back(tmp_path: Path) -> None:
    """A training forward saves q, k, v and the attention's output for the backward. q, k
    and v are stored contiguous for the attention kernel; eager's strides (views of the
    qkv projection) cost a second copy of each, and the output (saved through `alias`) a
    copy of its own. Saved activations now keep the layout they were stored in and the
    backward is compiled for it (compiler/training.py), `alias` is its input: the forward
    allocates q, k and v once. The gradients still match eager's."""
    _gradients_match_eager(cache_dir=str(tmp_path))
    forwards = [p.read_text() for p in tmp_path.rglob("graph_*.py")
                if "OUTPUT_STRIDES" in p.read_text()]
    assert len(forwards) == 1, [p.name for p in tmp_path.rglob("graph_*.py")]
    heads = re.findall(r"empty_strided\(\(2, 4, 16, 8\), \(([\d, ]+)\)", forwards[0])
    assert heads == ["512, 128, 8, 1"] * 3, heads
