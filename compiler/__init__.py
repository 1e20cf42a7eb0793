"""Kernelscope: a glass-box PyTorch compiler.

Public API:
  backend            the torch.compile backend (registered as "kernelscope")
  compile_snippet    run the whole pipeline on a snippet, yielding StageEvents
  CompileOptions     the one options object every stage receives
"""

from __future__ import annotations

import os
from typing import Any

from kernelscope.compiler.options import TRACE_DIR_ENV, CompileOptions
from kernelscope.compiler.versions import __version__

__all__ = ["CompileOptions", "__version__", "backend", "compile_snippet"]


def backend(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    """torch.compile(fn, backend="kernelscope") lands here (via the entry point)."""
    from kernelscope.compiler.compile_fx import make_backend

    options = dict(kwargs.get("options") or {})
    # `kernelscope run script.py` records the script's compiles: its trace directory
    # reaches every torch.compile(..., backend="kernelscope") that names none itself.
    if "trace_dir" not in options and os.environ.get(TRACE_DIR_ENV):
        options["trace_dir"] = os.environ[TRACE_DIR_ENV]
    return make_backend(CompileOptions.from_mapping(options))(gm, example_inputs)


def compile_snippet(code: str, options: CompileOptions | None = None, **kw: Any) -> Any:
    """Run every stage on a snippet; returns an iterator of StageEvent."""
    from kernelscope.compiler.pipeline import run_pipeline

    return run_pipeline(code, options or CompileOptions(), **kw)
