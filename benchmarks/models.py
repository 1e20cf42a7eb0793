"""Six real models, random weights from their configs, in inference: the suite's second half.

BERT-base, GPT-2 small and a four-layer Llama come from `transformers` configs, ViT-B/16,
ResNet-50 and ResNeXt-50 from `torchvision` (timm is not needed). Nothing is downloaded:
every model is built from its config with random initialisation. Each factory returns an
eval-mode module that maps one input tensor to one output tensor (the logits, or the last
hidden state), and that input. `available()` says which libraries are importable, so a
machine without them skips the models with a reason instead of failing.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from benchmarks.cases import pick


@dataclass(frozen=True)
class Model:
    name: str
    what: str
    needs: str  # the library it is built with
    make: Callable[[str], tuple[nn.Module, torch.Tensor]]
    tol: float = 5e-2  # bf16 through many layers; fp32 convnets use the same check


class _Logits(nn.Module):
    """Wrap a transformers model so it returns one tensor (the logits or hidden state)."""

    def __init__(self, model: nn.Module, field: str) -> None:
        super().__init__()
        self.model = model
        self.field = field

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return getattr(self.model(ids), self.field)


def _ids(device: str, batch: int, seq: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), device=device)


def _hf(config: Any, cls: str, field: str, device: str, dtype: torch.dtype) -> nn.Module:
    import transformers

    with torch.device(device):
        model = getattr(transformers, cls)(config)
    return _Logits(model.to(dtype).eval().requires_grad_(False), field)


def _bert(device: str) -> tuple[nn.Module, torch.Tensor]:
    from transformers import BertConfig

    model = _hf(BertConfig(), "BertModel", "last_hidden_state", device, torch.bfloat16)
    return model, _ids(device, 32, 128, 30522)


def _gpt2(device: str) -> tuple[nn.Module, torch.Tensor]:
    from transformers import GPT2Config

    cfg = GPT2Config(use_cache=False)
    return _hf(cfg, "GPT2LMHeadModel", "logits", device, torch.bfloat16), \
        _ids(device, 8, 512, 50257)


def _llama(device: str) -> tuple[nn.Module, torch.Tensor]:
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                      num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                      max_position_embeddings=2048, use_cache=False)
    return _hf(cfg, "LlamaForCausalLM", "logits", device, torch.bfloat16), \
        _ids(device, 4, 1024, 32000)


def _vision(name: str, dtype: torch.dtype) -> Callable[[str], tuple[nn.Module, torch.Tensor]]:
    def make(device: str) -> tuple[nn.Module, torch.Tensor]:
        import torchvision

        with torch.device(device):
            model = getattr(torchvision.models, name)(weights=None)
        head = getattr(getattr(model, "heads", None), "head", None)
        if head is not None:  # torchvision zero-initialises ViT's head: logits would be 0
            nn.init.normal_(head.weight, std=0.02)
        model = model.to(dtype).eval().requires_grad_(False)
        return model, torch.randn(64, 3, 224, 224, device=device, dtype=dtype)

    return make


MODELS: list[Model] = [
    Model("bert_base", "BERT-base bf16, 32x128", "transformers", _bert),
    Model("gpt2_small", "GPT-2 small bf16, 8x512", "transformers", _gpt2),
    Model("llama_4layer", "Llama-style 4 layers bf16, 4x1024", "transformers", _llama),
    Model("vit_b_16", "ViT-B/16 bf16, 64 images", "torchvision", _vision("vit_b_16",
                                                                           torch.bfloat16)),
    Model("resnet50", "ResNet-50 fp32, 64 images", "torchvision", _vision("resnet50",
                                                                           torch.float32)),
    Model("resnext50", "ResNeXt-50 fp32, 64 images", "torchvision",
          _vision("resnext50_32x4d", torch.float32)),
]


def available(model: Model) -> str | None:
    """None if the model can be built here, else why not."""
    if importlib.util.find_spec(model.needs) is None:
        return f"{model.needs} is not installed"
    return None


def by_name(names: list[str] | None) -> list[Model]:
    return pick(MODELS, names, "model")
