"""Small real-model stacks in plain torch (random init, few layers), for the CPU tests and
the GPU checks: a BERT-style encoder, a GPT-2-style decoder block stack, a Llama-style stack
(RMSNorm, rotary embeddings, SiLU-gated MLP), a ViT (patch embedding + encoder) and a
ResNet (bottleneck blocks with batch norm). Each `make_*` returns (module, input).

The real `transformers` / `torchvision` models are used where those libraries are installed
(`tests/models/device_checks.py` on the GPU host); CI builds these from their published
layer recipes instead, so it needs nothing beyond torch.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, causal: bool, rotary: bool = False) -> None:
        super().__init__()
        self.heads, self.causal, self.rotary = heads, causal, rotary
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        if self.rotary:
            q, k = _rope(q), _rope(k)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~mask, float("-inf"))
        y = att.softmax(-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def _rope(x: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as transformers' Llama writes it: frequencies from a matmul of
    inv_freq and the positions, transposed, `cat((freqs, freqs))`, and rotate_half."""
    t, h = x.shape[-2], x.shape[-1] // 2
    inv = 1.0 / (10000 ** (torch.arange(h, device=x.device, dtype=torch.float32) / h))
    pos = torch.arange(t, device=x.device, dtype=torch.float32)
    freqs = (inv[None, :, None] @ pos[None, None, :]).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., :h], x[..., h:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * \
            self.weight


class Block(nn.Module):
    """pre-norm (GPT-2, Llama, ViT) or post-norm (BERT) transformer block."""

    def __init__(self, dim: int, heads: int, style: str) -> None:
        super().__init__()
        self.style = style
        llama = style == "llama"
        self.attn = Attention(dim, heads, causal=style in ("gpt2", "llama"), rotary=llama)
        self.n1 = RMSNorm(dim) if llama else nn.LayerNorm(dim)
        self.n2 = RMSNorm(dim) if llama else nn.LayerNorm(dim)
        if llama:
            self.gate, self.up = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(dim, 4 * dim,
                                                                               bias=False)
            self.down = nn.Linear(4 * dim, dim, bias=False)
        else:
            self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        if self.style == "llama":
            return self.down(F.silu(self.gate(x)) * self.up(x))
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh" if self.style == "gpt2"
                               else "none"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.style == "bert":
            x = self.n1(x + self.attn(x))
            return self.n2(x + self.mlp(x))
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class TextModel(nn.Module):
    def __init__(self, style: str, vocab: int = 512, dim: int = 64, heads: int = 4,
                 layers: int = 2, seq: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim) if style != "llama" else None
        self.blocks = nn.ModuleList(Block(dim, heads, style) for _ in range(layers))
        self.norm = RMSNorm(dim) if style == "llama" else nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


class ViT(nn.Module):
    def __init__(self, dim: int = 64, patch: int = 8, image: int = 32, layers: int = 2,
                 classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, dim, patch, patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, 4, "vit") for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x)[:, 0])


class Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int, groups: int = 1) -> None:
        super().__init__()
        cout = width * 4
        self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.c2 = nn.Conv2d(width, width, 3, stride, 1, groups=groups, bias=False)
        self.b2 = nn.BatchNorm2d(width)
        self.c3, self.b3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                  nn.BatchNorm2d(cout)) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return F.relu(y + (self.down(x) if self.down is not None else x))


class ResNet(nn.Module):
    def __init__(self, groups: int = 1, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(Bottleneck(16, 8 * groups // groups * 1, 1, 1),
                                    Bottleneck(32, 16, 2, groups))
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def make(name: str, device: str = "cpu") -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    with torch.device(device):
        if name in ("bert", "gpt2", "llama"):
            model: nn.Module = TextModel(name)
            inp = torch.randint(0, 512, (2, 32))
        elif name == "vit":
            model, inp = ViT(), torch.randn(2, 3, 32, 32)
        else:
            model, inp = ResNet(groups=4 if name == "resnext" else 1), torch.randn(2, 3, 32, 32)
    return model.eval(), inp


NAMES = ["bert", "gpt2", "llama", "vit", "resnet", "resnext"]
