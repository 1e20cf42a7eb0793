"""Conv + BatchNorm + ReLU: a ResNet block in eval mode

The convolution runs as an extern kernel (cuDNN on a GPU, ATen on the CPU). In eval mode
BatchNorm is a per-channel scale and shift from its running statistics, so it and the ReLU
fuse into one pointwise kernel over the convolution's output.
"""

import torch
from torch import nn

torch.manual_seed(0)


class ConvBNReLU(nn.Module):
    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


block = ConvBNReLU(16).eval().requires_grad_(False)
with torch.no_grad():
    # Running statistics as a trained network would have them, not the 0/1 defaults.
    block.bn.running_mean.uniform_(-0.5, 0.5)
    block.bn.running_var.uniform_(0.5, 2.0)
    block.bn.weight.uniform_(0.5, 1.5)
    block.bn.bias.uniform_(-0.1, 0.1)

example_inputs = (torch.randn(2, 16, 16, 16),)

if __name__ == "__main__":
    print(block(*example_inputs).shape)
