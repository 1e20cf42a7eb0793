"""Helpers the generated wrapper modules import (kept tiny and explicit)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import torch

empty_strided = torch.empty_strided
device = torch.device


def reinterpret(t: torch.Tensor, size: Sequence[int], stride: Sequence[int],
                offset: int = 0) -> torch.Tensor:
    """View `t`'s memory with another size/stride; `offset` counts from t's first element."""
    return t.as_strided(size, stride, t.storage_offset() + offset)


def with_strides(t: Any, stride: Sequence[int]) -> Any:
    """`t` itself if it has `stride` (dims of size 1 aside), else a copy laid out so.

    An ATen call's result is addressed by the strides its FX meta promised; an op whose
    result follows its inputs' layout can return other strides than the meta says."""
    if not isinstance(t, torch.Tensor) or t.numel() <= 1:
        return t
    if all(a == b for a, b, n in zip(t.stride(), stride, t.shape) if n != 1):
        return t
    return torch.empty_strided(t.shape, tuple(stride), dtype=t.dtype,
                               device=t.device).copy_(t)


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def cpp_kernel(lib: Any, name: str, nargs: int) -> Any:
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn
