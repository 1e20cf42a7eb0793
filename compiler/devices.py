"""The devices a graph's tensors can live on: the one module that spells their names.

Everything else asks these names and helpers (the backends' rows in codegen/targets.py,
lowering's device of a value, the driver's device of a graph), so a comparison with a
device string outside this module is a test failure (tests/core/test_backend_names.py).
Torch is imported only where a helper reads a tensor, so the names stay importable by
torch-free code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

CPU = "cpu"
CUDA = "cuda"
DEVICES = (CPU, CUDA)  # what the `device` option may be


def device_type(t: Any) -> str:
    """The device a tensor (or fake tensor) lives on, by name."""
    return str(t.device.type)


def is_gpu(device: str) -> bool:
    return device == CUDA


def combined(devices: Iterable[str]) -> str:
    """Where a graph over tensors on `devices` computes: on the GPU if any tensor is there
    (CPU scalars mixed with CUDA tensors run on the GPU, as in eager), else on the CPU."""
    return CUDA if CUDA in set(devices) else CPU
