"""The compile pool builds each distinct kernel of a graph once, ahead of its first launch,
with the launch's arguments, grid and constexprs; a failed build is reported, not raised
(the launch builds it again and raises as before)."""

from __future__ import annotations

import threading
import types
from typing import Any

import torch

from kernelscope.compiler.codegen.triton.pool import PoolKernel, prebuild


class FakeKernel:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.threads: set[int] = set()
        self.fail = fail

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> None:
        self.threads.add(threading.get_ident())
        self.calls.append((args, grid, kwargs))
        if self.fail:
            raise RuntimeError("ptxas failed")


def test_each_distinct_kernel_is_built_once_with_its_launch() -> None:
    a, bad = FakeKernel(), FakeKernel(fail=True)
    module = types.SimpleNamespace(k0=a, k1=a, k2=bad)  # k1 is k0 (a deduplicated kernel)
    launch = [("ptr", torch.float16), ("ptr", torch.float32), ("int", 4096)]
    kernels = [PoolKernel(n, launch, (4, 1), {"XBLOCK": 1024, "num_warps": 4})
               for n in ("k0", "k1", "k2")]
    report = prebuild(module, kernels, workers=4)  # type: ignore[arg-type]
    assert a.calls == [((torch.float16, torch.float32, 4096), (4, 1),
                        {"XBLOCK": 1024, "num_warps": 4})]
    assert report["kernels"] == 2 and set(report["built_ms"]) == {"k0"}
    assert "ptxas failed" in report["errors"]["k2"]
    assert threading.get_ident() not in a.threads  # built on a pool thread


def test_an_emulated_backend_builds_nothing_ahead() -> None:
    from kernelscope.compiler.codegen.triton.backend import TritonBackend
    from kernelscope.compiler.options import CompileOptions

    backend = TritonBackend("cpu", CompileOptions(backend="triton"))
    assert backend.emulated and backend.prebuild(types.ModuleType("m"), [], {}, 0) == {}


class FakeCompiled:
    """What Triton's warmup returns: loaded (and its launcher built) on first use."""

    def __init__(self) -> None:
        self.loaded_on: list[int] = []

    def _init_handles(self) -> None:
        self.loaded_on.append(threading.get_ident())


def test_the_pool_loads_each_kernel_and_builds_its_launcher_off_the_launch_path() -> None:
    """Triton builds a kernel's C launcher (a C compiler run) at its first launch, one
    kernel after another, unless the kernel was loaded before: the pool does it, on its
    threads, for each kernel it built."""
    compiled = FakeCompiled()

    class Returning(FakeKernel):
        def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
            super().warmup(*args, grid=grid, **kwargs)
            return compiled

    module = types.SimpleNamespace(k0=Returning())
    report = prebuild(module, [PoolKernel("k0", [("int", 8)], (1,))],  # type: ignore[arg-type]
                      workers=2)
    assert report["errors"] == {} and set(report["built_ms"]) == {"k0"}
    assert len(compiled.loaded_on) == 1 and compiled.loaded_on[0] != threading.get_ident()
