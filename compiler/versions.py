"""What every trace says it was made with: Kernelscope's own version and the versions of
Python, torch, Triton and the GPU a compile ran on.

A leaf module: the package's `__init__`, the pipeline's `source` stage, the trace writer
and reader all read the version here, so none of them imports another for it. Torch-free
at import (the package and the command line import it before torch); `versions()` reads
torch's version when it is called.
"""

from __future__ import annotations

import importlib.metadata
import platform
from typing import Any

from kernelscope.compiler.devices import is_gpu

# server/jobs/info.py reads this line from the source of a checkout that is not installed.
__version__ = "0.1.0"


def versions(device: str) -> dict[str, Any]:
    """The versions a compile on `device` ran with (a `source` event's and a trace file's)."""
    import torch  # the caller compiles, so torch is already imported

    try:  # without importing Triton: its import decides whether it interprets
        triton_version: str | None = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton_version = None
    gpu = torch.cuda.get_device_name() if is_gpu(device) and torch.cuda.is_available() else None
    return {"python": platform.python_version(), "torch": torch.__version__,
            "triton": triton_version, "gpu": gpu, "kernelscope": __version__}
