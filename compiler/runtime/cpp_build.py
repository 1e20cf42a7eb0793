"""Load a C++ kernel library built by the C++ backend (compiler/codegen/cpp/kernel.py).

Generated wrapper modules import `load_library`; the g++ build itself belongs to the
backend.
"""

from __future__ import annotations

import ctypes


def load_library(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)
