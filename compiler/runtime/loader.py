"""Write generated code to the cache, build it, import it, and call it.

A graph's wrapper becomes a module file `graph_<key>.py` (Triton needs its kernels in a
real file); C++ kernels become `kernels_<key>.cpp` and a shared library next to it.
`CompiledGraph` is the callable that torch.compile gets back.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from compiler.options import CompileOptions
from compiler.runtime.cache import cache_root, content_key, write_once
from compiler.runtime.cpp_build import build_library
from compiler.runtime.timing import instrument


@dataclass
class CompiledGraph:
    module: ModuleType
    path: Path
    cache_hit: bool
    ms: float
    build_ms: float

    def __call__(self, *args: Any) -> list[Any]:
        return list(self.module.call(list(args)))


def cpp_library_path(cpp_source: str, options: CompileOptions) -> str:
    root = cache_root(options.cache_dir)
    return str(root / f"kernels_{content_key(cpp_source)}.so")


def load_graph(wrapper: str, cpp_source: str, backend: str, options: CompileOptions
               ) -> CompiledGraph:
    start = time.perf_counter()
    root = cache_root(options.cache_dir)
    build_ms, hit = 0.0, True
    if backend == "cpp":
        src = root / f"kernels_{content_key(cpp_source)}.cpp"
        write_once(src, cpp_source)
        result = build_library(src, cpp_source)
        build_ms, hit = result.ms, result.cache_hit
    elif _device_is_cpu(wrapper):
        ensure_interpreter()
    key = content_key(wrapper, backend)
    path = root / f"graph_{key}.py"
    hit = write_once(path, wrapper) and hit
    module = _import(path, f"kernelscope_graph_{key}")
    return CompiledGraph(module, path, hit, (time.perf_counter() - start) * 1000, build_ms)


class InterpreterUnavailable(RuntimeError):
    pass


def ensure_interpreter() -> None:
    """Triton kernels on the CPU need TRITON_INTERPRET=1 before Triton is first imported."""
    os.environ["TRITON_INTERPRET"] = "1"
    if "triton" in sys.modules:
        import triton.language as tl

        if type(tl.sigmoid).__name__ != "InterpretedFunction":
            raise InterpreterUnavailable(
                "Triton kernels on the CPU run under the Triton interpreter, which must be "
                "switched on before Triton is imported: set TRITON_INTERPRET=1 in the "
                "environment before importing torch")


def _device_is_cpu(wrapper: str) -> bool:
    return "device='cuda'" not in wrapper


def _import(path: Path, name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def zeros_like_spec(t: Any) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    return torch.zeros_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                               device=t.device) if hasattr(torch, "zeros_strided") else \
        torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                            device=t.device).zero_()


def real_inputs(example_inputs: list[Any]) -> list[Any]:
    """Zero-filled tensors shaped like the (possibly fake) example inputs."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return [zeros_like_spec(t) for t in example_inputs]


def warmup(compiled: CompiledGraph, example_inputs: list[Any], kernels: list[str]
           ) -> list[dict[str, Any]]:
    """Run once on zeros, timing each kernel's first launch (Triton JIT-compiles here)."""
    args = real_inputs(example_inputs)
    with instrument(compiled.module, kernels) as timings:
        compiled(*args)
    return [t.to_json() for t in timings.values()]
