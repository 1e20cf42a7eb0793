"""The benchmark suite: sixteen cases, each at three sizes (H200, CPU, smoke), and the
backward reductions of the training steps (`BACKWARD_CASES`: named with --cases, not in
the default run).

Each case is a function (or eval-mode module) and a factory of inputs. `make(device, size)`
returns the callable and its inputs at one of three sizes: "gpu" (the H200 suite: large
enough to be memory or matmul bound, tens of MB to GB), "cpu" (the CPU-sized suite: a few
MB, timed against Inductor's C++) and "smoke" (tiny, for CI: seconds in all, timings
meaningless). `CPU_SUITE` names the cases the CPU run times by default.

Bytes moved (for GB/s) are every input and output counted once, unless a case says
otherwise; `mutates` marks cases that update their inputs in place (the check then runs
each side on its own copies).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

Inputs = tuple[Any, ...]
SIZES = ("gpu", "cpu", "smoke")


@dataclass(frozen=True)
class Case:
    name: str
    what: str  # the wording of the case
    make: Callable[[str, str], tuple[Callable[..., Any], Inputs]]  # (device, size) ->
    memory_bound: bool = True
    mutates: bool = False
    tol: float = 1e-3  # rtol = atol of the check against eager (bf16 cases looser)


def _pick(size: str, gpu: Any, cpu: Any, smoke: Any) -> Any:
    return {"gpu": gpu, "cpu": cpu, "smoke": smoke}[size]


def _randn(device: str, *shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, device=device, dtype=dtype)


# ---- the computations ----------------------------------------------------------------


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def cos_sin(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(torch.sin(x))


def bias_relu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (x + b).relu()


def transposed_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y.t()


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def layer_norm_manual(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def rmsnorm_bf16(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    out = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w.float()
    return out.to(torch.bfloat16)


def col_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0)


def col_amax(x: torch.Tensor) -> torch.Tensor:
    return x.amax(0)


def square_sum(x: torch.Tensor) -> torch.Tensor:
    return (x * x).sum()


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits, target)


def linear_gelu_linear(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                       w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    return F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


def adam_update(params: list[torch.Tensor], grads: list[torch.Tensor],
                exp_avg: list[torch.Tensor], exp_avg_sq: list[torch.Tensor]) -> None:
    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8
    for p, g, m, v in zip(params, grads, exp_avg, exp_avg_sq):
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        p.addcdiv_(m, v.sqrt().add_(eps), value=-lr)


class GPT2Block(nn.Module):
    """Pre-LN GPT-2 block: causal self-attention written out, then a GELU(tanh) MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc, self.out = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, h, d // h).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        att = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class BasicBlock(nn.Module):
    """ResNet basic block (3x3 conv, BN, ReLU, 3x3 conv, BN, residual, ReLU), eval mode."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)



aten = torch.ops.aten


def mha_inproj_bias_grad(dq: torch.Tensor, dk: torch.Tensor, dv: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """nn.MultiheadAttention's in-projection gradient as its backward graph has it: the
    q/k/v gradients ([B, H, L, D]) back through the head split and `proj[i]`
    (select_backward), into [L*B, 3E] (the weight GEMM's operand) and its column sum (the
    bias gradient)."""
    b, h, seq, d = dq.shape
    e = h * d
    parts = [t.reshape(b * h, seq, d).transpose(0, 1).reshape(seq, b, e) for t in (dq, dk, dv)]
    g = aten.select_backward(parts[0], [3, seq, b, e], 0, 0)
    for i in (1, 2):
        g = g + aten.select_backward(parts[i], [3, seq, b, e], 0, i)
    g = g.unsqueeze(-2).transpose(0, -2).squeeze(0).reshape(seq * b, 3 * e)
    return g, g.sum(0)


def gelu_bias_grad(grad: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An MLP's fc1 backward: GELU's backward (the GEMM's operand) and its column sum (the
    bias gradient)."""
    g = aten.gelu_backward(grad, h)
    return g, g.sum(0)


def layernorm_backward(grad: torch.Tensor, x: torch.Tensor, mean: torch.Tensor,
                       rstd: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
    """LayerNorm's backward: the input gradient (row sums) and the weight and bias
    gradients (column sums over the tokens)."""
    return aten.native_layer_norm_backward(grad, x, [x.shape[-1]], mean, rstd, w, b,
                                           [True, True, True])


def rmsnorm_backward(grad: torch.Tensor, x: torch.Tensor, w: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama's RMSNorm (fp32 math, `w * normed.to(bf16)`) backward, written out as its
    backward graph computes it: the input gradient and the weight gradient (a column
    sum over the tokens)."""
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
    dw = (grad * (xf * r).to(x.dtype)).sum(0)
    gx = (grad * w).float()
    dx = r * gx - xf * (r * r * r) * (gx * xf).mean(-1, keepdim=True)
    return dx.to(x.dtype), dw


# ---- input factories -----------------------------------------------------------------


def _one(fn: Callable[..., Any], gpu: tuple[int, ...], cpu: tuple[int, ...],
         smoke: tuple[int, ...]) -> Callable[[str, str], tuple[Callable[..., Any], Inputs]]:
    def make(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
        return fn, (_randn(device, *_pick(size, gpu, cpu, smoke)),)

    return make


def _bias_relu(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    n = _pick(size, 8192, 1024, 64)
    return bias_relu, (_randn(device, n, n), _randn(device, n))


def _transposed(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    n = _pick(size, 8192, 1024, 64)
    return transposed_add, (_randn(device, n, n), _randn(device, n, n))


def _layer_norm(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    r, c = _pick(size, (32768, 4096), (1024, 1024), (16, 256))
    return layer_norm_manual, (_randn(device, r, c), _randn(device, c), _randn(device, c))


def _rmsnorm(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    r, c = _pick(size, (32768, 4096), (1024, 1024), (16, 256))
    bf = torch.bfloat16
    return rmsnorm_bf16, (_randn(device, r, c, dtype=bf), _randn(device, c, dtype=bf))


def _cross_entropy(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    r, c = _pick(size, (8192, 50257), (256, 8192), (8, 1000))
    return cross_entropy, (_randn(device, r, c), torch.randint(0, c, (r,), device=device))


def _mlp(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    t, d, h = _pick(size, (8192, 4096, 16384), (256, 512, 2048), (16, 64, 256))
    dtype = torch.bfloat16 if size == "gpu" else torch.float32
    s1, s2 = 1 / math.sqrt(d), 1 / math.sqrt(h)
    return linear_gelu_linear, (
        _randn(device, t, d, dtype=dtype), _randn(device, h, d, dtype=dtype) * s1,
        _randn(device, h, dtype=dtype), _randn(device, d, h, dtype=dtype) * s2,
        _randn(device, d, dtype=dtype))


def _attention(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    shape = _pick(size, (8, 16, 1024, 64), (2, 8, 256, 64), (1, 2, 32, 16))
    dtype = torch.bfloat16 if size == "gpu" else torch.float32
    return naive_attention, tuple(_randn(device, *shape, dtype=dtype) for _ in range(3))


def _gpt2_block(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    b, s, d, h = _pick(size, (16, 1024, 768, 12), (2, 128, 256, 4), (1, 16, 64, 2))
    dtype = torch.bfloat16 if size == "gpu" else torch.float32
    with torch.device(device):
        block = GPT2Block(d, h).to(dtype).eval().requires_grad_(False)
    return block, (_randn(device, b, s, d, dtype=dtype),)


def _basic_block(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    n, c, hw = _pick(size, (64, 64, 56), (4, 64, 28), (1, 8, 8))
    with torch.device(device):
        block = BasicBlock(c).eval().requires_grad_(False)
        for bn in (block.bn1, block.bn2):  # running statistics as a trained net has them
            assert bn.running_mean is not None and bn.running_var is not None
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.1, 0.1)
    return block, (_randn(device, n, c, hw, hw),)


def _adam(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    # 20 tensors; 4 read and 3 written per element: 28 bytes. GPU: 20 x 12.5M x 28 = 7 GB.
    n = _pick(size, 12_500_000, 100_000, 1000)
    lists = tuple([_randn(device, n + 64 * i) for i in range(20)] for _ in range(3))
    sq = [torch.rand(n + 64 * i, device=device) for i in range(20)]
    return adam_update, (*lists, sq)


def _mha_grads(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    # ViT-B/16, 64 images: [B, H, L, D] gradients laid out as [B, L, H, D] (SDPA's)
    b, h, seq, d = _pick(size, (64, 12, 197, 64), (8, 12, 197, 64), (2, 2, 9, 8))
    dtype = torch.bfloat16 if size == "gpu" else torch.float32
    return mha_inproj_bias_grad, tuple(
        _randn(device, b, seq, h, d, dtype=dtype).transpose(1, 2) for _ in range(3))


def _gelu_grad(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    t, c = _pick(size, (64 * 197, 3072), (8 * 197, 3072), (37, 48))  # ViT-B/16's fc1
    dtype = torch.bfloat16 if size == "gpu" else torch.float32
    return gelu_bias_grad, (_randn(device, t, c, dtype=dtype), _randn(device, t, c, dtype=dtype))


def _ln_grad(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    t, c = _pick(size, (64 * 197, 768), (8 * 197, 768), (37, 48))  # ViT-B/16 (fp32 under autocast)
    x = _randn(device, t, c)
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-6)
    return layernorm_backward, (_randn(device, t, c), x, mean, rstd, _randn(device, c),
                                _randn(device, c))


def _rms_grad(device: str, size: str) -> tuple[Callable[..., Any], Inputs]:
    t, c = _pick(size, (4 * 1024, 2048), (512, 2048), (37, 48))  # the Llama stack's
    dtype = torch.bfloat16 if size == "gpu" else torch.float32
    return rmsnorm_backward, (_randn(device, t, c, dtype=dtype), _randn(device, t, c, dtype=dtype),
                              _randn(device, c, dtype=dtype))


CASES: list[Case] = [
    Case("gelu_tanh", "GELU tanh approx, 1-D", _one(gelu_tanh, (1 << 26,), (1 << 22,),
                                                     (4096,))),
    Case("cos_sin", "cos(sin(x))", _one(cos_sin, (1 << 26,), (1 << 22,), (4096,))),
    Case("bias_relu", "(x + b).relu(), b broadcast", _bias_relu),
    Case("transposed_add", "x + y.t()", _transposed),
    Case("softmax", "softmax(-1)", _one(softmax, (32768, 4096), (2048, 1024), (16, 256))),
    Case("softmax_wide", "softmax(-1), wide rows",
         _one(softmax, (512, 262144), (16, 65536), (2, 8192))),
    Case("layer_norm_manual", "hand-written LayerNorm", _layer_norm),
    Case("rmsnorm_bf16", "RMSNorm, bf16 in/out, fp32 math", _rmsnorm, tol=2e-2),
    Case("col_sum", "x.sum(0)", _one(col_sum, (16384, 8192), (2048, 1024), (64, 32))),
    # A bias gradient's shape: tokens x hidden, more rows than one chunk of a row sum.
    Case("col_sum_long", "x.sum(0), many rows", _one(col_sum, (65536, 768), (16384, 768),
                                                       (5000, 8))),
    Case("col_amax", "x.amax(0) (NaN-propagating)", _one(col_amax, (16384, 8192), (2048, 1024),
                                                        (64, 32))),
    Case("square_sum", "(x*x).sum()", _one(square_sum, (1 << 28,), (1 << 24,), (4096,))),
    Case("cross_entropy", "F.cross_entropy", _cross_entropy),
    Case("linear_gelu_linear", "linear -> GELU(tanh) -> linear", _mlp, memory_bound=False,
         tol=3e-2),
    Case("attention", "naive attention softmax(QK^T/sqrt d)V", _attention, memory_bound=False,
         tol=3e-2),
    Case("gpt2_block", "GPT-2-style block (LN, causal attention, MLP)", _gpt2_block,
         memory_bound=False, tol=6e-2),
    Case("basic_block", "ResNet basic block, eval", _basic_block, memory_bound=False),
    Case("adam", "Adam-style update over 20 tensors", _adam, mutates=True),
]

# The training steps' backward reductions (docs/perf/training-steps.md): timed
# when named (`--cases mha_inproj_bias_grad,...`), not part of the sixteen-case suite.
BACKWARD_CASES: list[Case] = [
    Case("mha_inproj_bias_grad", "MHA in-projection grad + bias grad (ViT-B/16)", _mha_grads,
         tol=3e-2),
    Case("gelu_bias_grad", "GELU backward + fc1 bias grad (ViT-B/16)", _gelu_grad, tol=3e-2),
    Case("layernorm_backward", "LayerNorm backward, fp32 (ViT-B/16)", _ln_grad, tol=1e-2),
    Case("rmsnorm_backward", "RMSNorm backward, bf16 (Llama stack)", _rms_grad, tol=3e-2),
]

# The CPU-sized suite timed by `--device cpu`: the ten CPU cases of the first issue, and
# the column reductions over many rows and with a max that the C++ walk once left strided.
CPU_SUITE = ["gelu_tanh", "cos_sin", "bias_relu", "softmax", "layer_norm_manual",
             "rmsnorm_bf16", "col_sum", "square_sum", "cross_entropy", "linear_gelu_linear",
             "col_sum_long", "col_amax"]


class Named(Protocol):
    @property
    def name(self) -> str: ...


N = TypeVar("N", bound=Named)


def pick(table: list[N], names: list[str] | None, what: str) -> list[N]:
    """The entries of `table` called `names`, in that order (all of them for none); an
    unknown name stops the run, listing the known ones."""
    if not names:
        return table
    known = {entry.name: entry for entry in table}
    missing = [n for n in names if n not in known]
    if missing:
        raise SystemExit(f"unknown {what}(s): {', '.join(missing)}; known: {', '.join(known)}")
    return [known[n] for n in names]


def by_name(names: list[str] | None) -> list[Case]:
    """The named cases (suite and backward ones); none named: the suite's."""
    if not names:
        return CASES
    return pick(CASES + BACKWARD_CASES, names, "case")
