"""Build C++ kernels with g++ into a shared library and load it with ctypes."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

CXX = os.environ.get("CXX", "g++")
FLAGS = ["-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17",
         "-fno-math-errno", "-Wno-unused-variable"]


class BuildError(Exception):
    def __init__(self, message: str, kernel: str | None, log: str) -> None:
        super().__init__(message)
        self.kernel = kernel
        self.log = log


@dataclass
class BuildResult:
    path: Path
    cache_hit: bool
    ms: float


def build_library(source_path: Path, source: str) -> BuildResult:
    import time

    lib = source_path.with_suffix(".so")
    if lib.exists():
        return BuildResult(lib, True, 0.0)
    start = time.perf_counter()
    tmp = lib.with_suffix(f".so.tmp{os.getpid()}")
    proc = subprocess.run([CXX, *FLAGS, str(source_path), "-o", str(tmp)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"g++ failed to build {source_path.name}",
                         _kernel_at_error(source, proc.stderr), proc.stderr[-4000:])
    os.replace(tmp, lib)
    return BuildResult(lib, False, (time.perf_counter() - start) * 1000)


def _kernel_at_error(source: str, stderr: str) -> str | None:
    m = re.search(r":(\d+):\d+: error", stderr)
    if not m:
        return None
    line = int(m.group(1))
    current = None
    for i, text in enumerate(source.splitlines(), 1):
        k = re.match(r'extern "C" void (\w+)\(', text)
        if k:
            current = k.group(1)
        if i >= line:
            break
    return current


def load_library(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)
