"""The registry of code generation targets: each row of codegen/targets.py and its class.
Adding a target is one `Backend` module, its row in `targets.TARGETS` and a `REGISTRY` line.
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


def choose_backend(requested: str, device: str, options: CompileOptions) -> Backend:
    """The backend for a graph whose tensors live on `device` (see targets.resolve)."""
    return REGISTRY[targets.resolve(requested, device).name](device, options)


def kernel_backends(graph: Backend, devices: Iterable[str], options: CompileOptions
                    ) -> dict[str, Backend]:
    """The backend of each device a graph's kernels run on: the graph's own for its device,
    "auto" for any other (a CUDA graph's CPU kernels run in C++)."""
    chosen = {graph.device: graph}
    for device in sorted(set(devices)):
        if device not in chosen:
            chosen[device] = choose_backend("auto", device, options)
    return chosen
