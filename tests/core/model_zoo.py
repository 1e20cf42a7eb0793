"""User-defined modules as people paste them (imported by test_model_zoo.py): each is a
snippet run exactly as the explorer runs one, with the module paths its kernels must name.

`ZOO[name] = (code, paths)`: `paths` are module paths some kernel of the compiled graph
must lie in (so repeated blocks are told apart: `blocks.0` and `blocks.1`).
"""

from __future__ import annotations

BLOCK = '''import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


'''

SEQUENTIAL = BLOCK + '''model = nn.Sequential(Block(16), Block(16), nn.LayerNorm(16)).eval()
example_inputs = (torch.randn(4, 16),)
'''

MODULE_LIST = BLOCK + '''class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(16) for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


net = Net().eval()
example_inputs = (torch.randn(4, 16),)
'''

NESTED = BLOCK + '''class Stage(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(Block(8), nn.GELU())
        self.skip = nn.Linear(8, 8)

    def forward(self, x):
        return self.inner(x) * torch.sigmoid(self.skip(x))


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleDict({"a": Stage(), "b": Stage()})

    def forward(self, x):
        return self.stages["b"](self.stages["a"](x)).sum(-1)


outer = Outer().eval()
compiled = torch.compile(outer)
compiled(torch.randn(2, 8))
'''

# Tiny Hugging Face models, built from a config with random weights (nothing downloaded).
HF_GPT2 = '''import torch
from transformers import GPT2Config, GPT2Model

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32)
model = GPT2Model(config).eval()
example_inputs = (torch.randint(0, 64, (1, 8)),)
'''

HF_BERT = '''import torch
from transformers import BertConfig, BertModel

torch.manual_seed(0)
config = BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                    intermediate_size=64, vocab_size=64, max_position_embeddings=32)
model = BertModel(config).eval()
example_inputs = (torch.randint(0, 64, (1, 8)),)
'''

HF_LLAMA = '''import torch
from transformers import LlamaConfig, LlamaModel

torch.manual_seed(0)
config = LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                     hidden_size=32, intermediate_size=64, vocab_size=64,
                     max_position_embeddings=32)
model = LlamaModel(config).eval()
example_inputs = (torch.randint(0, 64, (1, 8)),)
'''

ZOO: dict[str, tuple[str, list[str]]] = {
    "sequential": (SEQUENTIAL, ["0", "1", "2"]),
    "module_list": (MODULE_LIST, ["blocks.0", "blocks.1", "blocks.2"]),
    "nested": (NESTED, ["stages.a.inner.0", "stages.b.inner.0", "stages.a.skip"]),
    "hf_gpt2": (HF_GPT2, ["h.0", "h.1"]),
    "hf_bert": (HF_BERT, ["encoder.layer.0", "encoder.layer.1"]),
    "hf_llama": (HF_LLAMA, ["layers.0", "layers.1"]),
}
