"""Kernelscope: a glass-box PyTorch compiler.

Public API:
  backend            the torch.compile backend (registered as "kernelscope")
  compile_snippet    run the whole pipeline on a snippet, yielding StageEvents
  CompileOptions     the one options object every stage receives
"""

from __future__ import annotations

from typing import Any

from compiler.options import CompileOptions

__all__ = ["CompileOptions", "backend", "compile_snippet"]
__version__ = "0.1.0"


def backend(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    """torch.compile(fn, backend="kernelscope") lands here (via the entry point)."""
    from compiler.compile_fx import make_backend

    return make_backend(CompileOptions.from_mapping(kwargs.get("options") or {}))(
        gm, example_inputs
    )


def compile_snippet(code: str, options: CompileOptions | None = None, **kw: Any) -> Any:
    """Run every stage on a snippet; returns an iterator of StageEvent."""
    from compiler.pipeline import run_pipeline

    return run_pipeline(code, options or CompileOptions(), **kw)
