"""Benchmark cases: the samples' computations at GPU-sized shapes.

Each case names the sample it mirrors, the function (or module) to compile, taken from
that sample where it can be, and a factory that makes inputs of benchmark size on a
device. Shapes are chosen to be memory bound and large enough (tens of MB) that launch
overhead does not dominate: pointwise over 16M elements, rows of (8192, 4096).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

from benchmarks.snippet import SAMPLES_DIR, Snippet, load_snippet

Inputs = tuple[Any, ...]


@dataclass(frozen=True)
class Case:
    name: str
    sample: str  # samples/<sample>.py
    make: Callable[[str], tuple[Callable[..., Any], Inputs]]  # device -> (fn, inputs)
    # Bytes a perfect kernel would move; None: all input and output bytes.
    bytes_moved: Callable[[Inputs, Any], int] | None = None
    note: str = ""


@cache
def _sample(name: str) -> Snippet:
    return load_snippet(SAMPLES_DIR / f"{name}.py", device="cpu")


def _fn(sample: str) -> Callable[..., Any]:
    return _sample(sample).entry


def _randn(device: str, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, device=device, dtype=torch.float32)


def _pointwise(sample: str, nargs: int, shape: tuple[int, ...] = (4096, 4096)) -> Case:
    def make(device: str) -> tuple[Callable[..., Any], Inputs]:
        return _fn(sample), tuple(_randn(device, *shape) for _ in range(nargs))

    return Case(sample, sample, make)


def _rows(sample: str, shape: tuple[int, int] = (8192, 4096), params: int = 0) -> Case:
    def make(device: str) -> tuple[Callable[..., Any], Inputs]:
        x = _randn(device, *shape)
        return _fn(sample), (x, *(_randn(device, shape[-1]) for _ in range(params)))

    return Case(sample, sample, make)


def _transposed_add(device: str) -> tuple[Callable[..., Any], Inputs]:
    return _fn("transposed_add"), (_randn(device, 4096, 4096), _randn(device, 4096, 4096))


def _linear_gelu(device: str) -> tuple[Callable[..., Any], Inputs]:
    x, w, b = _randn(device, 8192, 1024), _randn(device, 4096, 1024) * 0.03, _randn(device, 4096)
    return _fn("linear_gelu"), (x, w, b)


def _conv_bn_relu(device: str) -> tuple[Callable[..., Any], Inputs]:
    block_type = type(_sample("conv_bn_relu").entry)
    with torch.device(device):
        block = block_type(64).eval().requires_grad_(False)
        block.bn.running_mean.uniform_(-0.5, 0.5)
        block.bn.running_var.uniform_(0.5, 2.0)
    return block, (_randn(device, 32, 64, 56, 56),)


def _transformer_block(device: str) -> tuple[Callable[..., Any], Inputs]:
    block_type = type(_sample("transformer_block").entry)
    with torch.device(device):
        block = block_type(dim=512, heads=8, hidden=2048).eval().requires_grad_(False)
    return block, (_randn(device, 8, 512, 512),)


def _embedding(device: str) -> tuple[Callable[..., Any], Inputs]:
    ids = torch.randint(0, 32000, (32, 512), device=device)
    return _fn("embedding_lookup"), (ids, _randn(device, 32000, 1024))


def _embedding_bytes(inputs: Inputs, out: Any) -> int:
    ids, _ = inputs
    return ids.nbytes + 2 * out.nbytes  # the rows gathered, and the output


def _cat_pad(device: str) -> tuple[Callable[..., Any], Inputs]:
    return _fn("cat_pad"), (_randn(device, 8192, 1536), _randn(device, 8192, 2560))


CASES: list[Case] = [
    _pointwise("add_relu", 2),
    _pointwise("cos_sin", 1, (16 * 1024 * 1024,)),
    _pointwise("gelu_tanh", 1, (16 * 1024 * 1024,)),
    _rows("layer_norm_manual", params=2),
    _rows("softmax"),
    _rows("rmsnorm", params=1),
    Case("linear_gelu", "linear_gelu", _linear_gelu, note="matmul-bound"),
    Case("conv_bn_relu", "conv_bn_relu", _conv_bn_relu, note="conv-bound"),
    Case("transformer_block", "transformer_block", _transformer_block, note="matmul-bound"),
    Case("transposed_add", "transposed_add", _transposed_add),
    _rows("row_sum"),
    _rows("col_sum"),
    _pointwise("full_sum", 1),
    Case(
        "embedding_lookup",
        "embedding_lookup",
        _embedding,
        _embedding_bytes,
        note="bytes: ids + rows read + output",
    ),
    Case("cat_pad", "cat_pad", _cat_pad),
]
# graph_break.py is left out: its print() would run inside every timed call.


def by_name(names: list[str] | None) -> list[Case]:
    if not names:
        return CASES
    known = {c.name: c for c in CASES}
    missing = [n for n in names if n not in known]
    if missing:
        raise SystemExit(f"unknown case(s): {', '.join(missing)}; known: {', '.join(known)}")
    return [known[n] for n in names]
