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


def ptr(t: torch.Tensor) -> int:
    """A tensor's address for a C++ kernel (whose argtypes make it a `void*`)."""
    return t.data_ptr()


def cpp_kernel(lib: Any, name: str, nargs: int) -> Any:
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn
