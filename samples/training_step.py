"""Training step: an MLP's forward and backward graphs, and an AdamW step

Under grad mode AOTAutograd splits the traced step into a forward graph (which also returns
the activations the backward needs: the memory plan lists them) and a backward graph (the
gradients). `loss.backward()` breaks the Dynamo graph; the optimizer step after it is traced
by Dynamo and compiled as graphs of its own.
"""

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.LayerNorm(64), nn.GELU(), nn.Linear(64, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)


@torch.compile
def train_step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


x = torch.randn(16, 32)
y = torch.randint(0, 10, (16,))
print("loss", train_step(x, y).item())
