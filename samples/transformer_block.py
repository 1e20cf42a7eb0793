"""A small pre-norm transformer block: LayerNorm, attention, residuals, GELU MLP

Batch 2, sequence 16, model dim 64, 4 heads, eval mode, no dropout. The matmuls run as
extern kernels; layer norms, the scaled softmax, the residual adds and the GELU become
fused reduction and pointwise kernels between them, and the head split is a view (an
index remap), never a copy.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


class Block(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4, hidden: int = 256) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def attention(self, x):
        b, s, d = x.shape
        h = self.heads
        q = self.q(x).view(b, s, h, d // h).transpose(1, 2)
        k = self.k(x).view(b, s, h, d // h).transpose(1, 2)
        v = self.v(x).view(b, s, h, d // h).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        weights = torch.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(b, s, d)
        return self.proj(out)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return x


block = Block().eval().requires_grad_(False)
example_inputs = (torch.randn(2, 16, 64),)

if __name__ == "__main__":
    print(block(*example_inputs).shape)
