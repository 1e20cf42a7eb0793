"""Load a sample snippet the way the compiler reads it, without compiling anything.

A snippet (docs/snippets.md) is a Python file run under a default device. Either it calls
`torch.compile(fn)` and then the compiled function (the first call's arguments are the
example inputs), or it defines `example_inputs` and an entry: `entry` if defined, else the
last top-level function or nn.Module instance. This module executes the file with
`torch.compile` replaced by a recorder, so the benchmarks can reuse the samples' functions
and modules at larger shapes. The compiler's own `source` stage is the authoritative reader.
"""

from __future__ import annotations

import contextlib
import io
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples"


@dataclass
class Snippet:
    """What a snippet compiles: its entry, the example inputs, and its namespace."""

    name: str
    title: str
    entry: Callable[..., Any]
    example_inputs: tuple[Any, ...]
    namespace: dict[str, Any] = field(repr=False)


@dataclass
class _Recorder:
    """Stands in for torch.compile: remembers the first compiled callable and its call."""

    calls: list[tuple[Callable[..., Any], tuple[Any, ...]]] = field(default_factory=list)

    def compile(self, model: Any = None, **_: Any) -> Any:
        if model is None:  # @torch.compile(...) with arguments: return the decorator
            return lambda fn: self.compile(fn)
        return self._wrap(model)

    def _wrap(self, model: Callable[..., Any]) -> Callable[..., Any]:
        def compiled(*args: Any, **kwargs: Any) -> Any:
            if not any(fn is model for fn, _ in self.calls):
                self.calls.append((model, args))
            return model(*args, **kwargs)

        compiled.__wrapped__ = model  # type: ignore[attr-defined]
        return compiled


def title_of(code: str) -> str:
    """The first line of the module docstring ("Add + ReLU: two pointwise ops, one kernel")."""
    module = compile(code, "<snippet>", "exec", flags=0, dont_inherit=True)
    doc = module.co_consts[0] if module.co_consts else None
    return doc.strip().splitlines()[0] if isinstance(doc, str) else ""


def _defined_here(value: Any, filename: str) -> bool:
    if isinstance(value, torch.nn.Module):
        return True
    code = getattr(value, "__code__", None)
    return isinstance(value, types.FunctionType) and code.co_filename == filename


def _find_entry(namespace: dict[str, Any], filename: str) -> Callable[..., Any]:
    if "entry" in namespace:
        return namespace["entry"]
    candidates = [v for k, v in namespace.items() if not k.startswith("__")]
    candidates = [v for v in candidates if _defined_here(v, filename)]
    if not candidates:
        raise ValueError(f"{filename}: no torch.compile call, no entry function or module")
    return candidates[-1]


@contextlib.contextmanager
def _recording_compile(recorder: _Recorder) -> Iterator[None]:
    original = torch.compile
    torch.compile = recorder.compile  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.compile = original


def load_snippet(path: str | Path, device: str = "cpu", quiet: bool = True) -> Snippet:
    """Run the snippet under `device` (eagerly) and return its entry and example inputs."""
    path = Path(path)
    code = path.read_text()
    filename = str(path.resolve())
    namespace: dict[str, Any] = {"__name__": "__kernelscope__", "__file__": filename}
    recorder = _Recorder()
    sink = io.StringIO() if quiet else None
    quieted = contextlib.redirect_stdout(sink) if sink else contextlib.nullcontext()
    with _recording_compile(recorder), torch.device(device), quieted:
        exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - our own samples
    if recorder.calls:
        entry, inputs = recorder.calls[0]
    else:
        entry = _find_entry(namespace, filename)
        inputs = tuple(namespace.get("example_inputs", ()))
        if not inputs:
            raise ValueError(f"{path.name}: no torch.compile call and no example_inputs")
    return Snippet(path.stem, title_of(code), entry, inputs, namespace)


def sample_paths() -> list[Path]:
    return sorted(SAMPLES_DIR.glob("*.py"))
