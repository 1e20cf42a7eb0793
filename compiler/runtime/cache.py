"""On-disk compile cache, keyed by generated source, options and tool versions.

Generated wrappers and C++ libraries are written once under the cache directory and
found again by content hash: recompiling the same graph costs a file lookup.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import platform
import threading
from pathlib import Path

import torch

from kernelscope.compiler.devices import is_gpu


def cache_root(configured: str | None = None) -> Path:
    root = configured or os.environ.get("KERNELSCOPE_CACHE")
    path = Path(root) if root else Path.home() / ".cache" / "kernelscope"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache  # the installed versions do not change under a running process; the
def versions_key() -> str:  # metadata lookup scans site-packages (~1 ms a call)
    try:  # the installed version, without importing Triton (its import picks its mode)
        tv = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        tv = "none"
    return f"torch={torch.__version__};triton={tv};py={platform.python_version()}"


def device_name(device: str) -> str:
    """What a result measured or built on `device` depends on: the GPU's own name."""
    if is_gpu(device) and torch.cuda.is_available():
        return torch.cuda.get_device_name()
    return device


def content_key(*parts: str) -> str:
    h = hashlib.sha256()
    for p in (*parts, versions_key()):
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def write_once(path: Path, text: str) -> bool:
    """Write `text` to `path` unless the file holds exactly that already; True if it did.

    Files are named by their content's hash, so a file there with other content is
    damaged (or was tampered with): it is replaced, never trusted."""
    try:
        if path.read_text() == text:
            return True
    except (OSError, UnicodeDecodeError):
        pass
    write_atomic(path, text)
    return False


def write_atomic(path: Path, text: str) -> None:
    """Write under a temporary name, then rename: a reader sees the old file or the new."""
    # Per thread too: a compile stage builds its graphs' libraries at once.
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)
