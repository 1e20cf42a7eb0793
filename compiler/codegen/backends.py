"""The registry of code generation targets: each target's row (codegen/targets.py, torch
free) and the class that implements it.

Adding a target is one module (a `Backend` subclass with its kernel class), its row in
`targets.TARGETS` and one line in `REGISTRY`. The driver calls `choose_backend` once per
graph, with the device the graph's tensors live on; "auto" is resolved by
`targets.resolve`, nowhere else.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.codegen.backend import Backend
from kernelscope.compiler.codegen.cpp.kernel import CppBackend
from kernelscope.compiler.codegen.triton.backend import TritonBackend
from kernelscope.compiler.options import CompileOptions

REGISTRY: dict[str, type[Backend]] = {
    TritonBackend.name: TritonBackend,
    CppBackend.name: CppBackend,
}


def backend_names() -> list[str]:
    return list(REGISTRY)


def choose_backend(requested: str, device: str, options: CompileOptions) -> Backend:
    """The backend for a graph whose tensors live on `device` (see targets.resolve)."""
    return REGISTRY[targets.resolve(requested, device).name](device, options)


def kernel_backends(graph: Backend, devices: Iterable[str], options: CompileOptions
                    ) -> dict[str, Backend]:
    """The backend of each device a graph's kernels run on: the graph's own backend for
    its device, that device's own ("auto") for any other. A CUDA graph that also computes
    on CPU tensors (a factory without a device) runs those kernels in C++, never Triton
    kernels over host memory."""
    chosen = {graph.device: graph}
    for device in sorted(set(devices)):
        if device not in chosen:
            chosen[device] = choose_backend("auto", device, options)
    return chosen
