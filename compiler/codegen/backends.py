"""The registry of code generation targets, and the one place "auto" is resolved.

Adding a target is one module (a `Backend` subclass with its kernel class) and one line
in `REGISTRY`. The driver calls `choose_backend` once per graph, with the device the
graph's tensors live on.
"""

from __future__ import annotations

from compiler.codegen.backend import Backend
from compiler.codegen.cpp import CppBackend
from compiler.codegen.triton import TritonBackend
from compiler.options import CompileOptions

# In order of preference: "auto" takes the first one native to the device.
REGISTRY: tuple[type[Backend], ...] = (
    TritonBackend,
    CppBackend,
)


def backend_names() -> list[str]:
    return [b.name for b in REGISTRY]


def choose_backend(requested: str, device: str, options: CompileOptions) -> Backend:
    """The backend for a graph whose tensors live on `device` ("auto": the first
    registered backend native to it; a named one if it can run there at all)."""
    if requested == "auto":
        for cls in REGISTRY:
            if device in cls.devices:
                return cls(device, options)
        raise ValueError(f"no backend generates code for device {device!r}")
    by_name = {b.name: b for b in REGISTRY}
    if requested not in by_name:
        raise ValueError(f"unknown backend {requested!r}; choose one of "
                         f"auto, {', '.join(by_name)}")
    cls = by_name[requested]
    if device not in cls.devices + cls.also_runs_on:
        native = [b.name for b in REGISTRY if device in b.devices]
        raise ValueError(f"the {cls.label} backend cannot run on {device!r}; use --backend "
                         f"{' or '.join(native) or 'auto'} for {device}")
    return cls(device, options)
