"""Helpers the generated wrapper modules import (kept tiny and explicit)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import torch

from kernelscope.compiler.devices import CPU, is_gpu

device = torch.device
# Inductor's allocation fast paths (no argument parsing, no device string): microseconds a
# buffer on every call.
_empty_strided_cuda = getattr(torch._C._dynamo.guards, "_empty_strided_cuda", None)
_empty_strided_cpu = getattr(torch._C._dynamo.guards, "_empty_strided_cpu", None)


def empty_strided(size: Sequence[int], stride: Sequence[int], device: str,
                  dtype: torch.dtype) -> torch.Tensor:
    if is_gpu(device):
        if _empty_strided_cuda is not None:
            return _empty_strided_cuda(size, stride, dtype)
    elif device == CPU and _empty_strided_cpu is not None:
        return _empty_strided_cpu(size, stride, dtype)
    return torch.empty_strided(size, stride, device=device, dtype=dtype)


def reinterpret(t: torch.Tensor, size: Sequence[int], stride: Sequence[int],
                offset: int = 0) -> torch.Tensor:
    """View `t`'s memory with another size/stride; `offset` counts from t's first element."""
    return t.as_strided(size, stride, t.storage_offset() + offset)


def conform(t: torch.Tensor, size: Sequence[int], stride: Sequence[int]) -> torch.Tensor:
    """An extern's output in the layout the compiler planned for it (the FX meta's).

    Some ATen kernels return other strides than their meta functions give: CUDA flash
    attention's output is [b, s, h, d] in memory, transposed to [b, h, s, d], where the
    meta says contiguous [b, h, s, d] whenever the query is a strided view. Our kernels
    index the buffer by the planned strides, so a mismatch is copied into them. What is
    not a tensor (an undefined logsumexp that was not asked for comes back as None) or is
    empty is returned as it is."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return t
    for a, b, n in zip(t.stride(), stride, t.shape):  # a loop: once per extern call
        if a != b and n > 1:
            break
    else:
        return t
    out = torch.empty_strided(tuple(size), tuple(stride), dtype=t.dtype, device=t.device)
    return out.copy_(t)


def ptr(t: torch.Tensor) -> int:
    """A tensor's address for a C++ kernel (whose argtypes make it a `void*`)."""
    return t.data_ptr()


def cpp_kernel(lib: Any, name: str, nargs: int) -> Any:
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn
