"""The `profile` stage's measurements: eager, Kernelscope and Inductor time, per kernel.

Timing follows the usual rules: warm up first, take medians, synchronize the device.
On a GPU: `triton.testing.do_bench` for whole calls and CUDA events around each kernel
launch; achieved bandwidth against a measured device-to-device copy. On the CPU (C++
kernels) the same with a wall clock. Under the Triton interpreter nothing of ours is timed.
TorchInductor (the `inductor` event, after our result) is timed the same way, its kernels
through the same proxies swapped into the modules it generated.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from kernelscope.compiler.devices import CPU, CUDA, is_gpu
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime.inductor import inductor_output
from kernelscope.compiler.runtime.timing import instrument


def _bench_cpu(fn: Callable[[], Any], budget_s: float = 0.5) -> float:
    fn()
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < 5 or (time.perf_counter() < deadline and len(times) < 200):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _bench_cuda(fn: Callable[[], Any]) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


_PEAK: dict[str, float] = {}


def copy_bandwidth_gbps() -> float:
    """Device-to-device copy bandwidth (bytes read + written), measured once."""
    if CUDA not in _PEAK:
        n = 256 * 1024 * 1024 // 4
        src = torch.empty(n, device=CUDA)
        dst = torch.empty_like(src)
        ms = _bench_cuda(lambda: dst.copy_(src))
        _PEAK[CUDA] = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9
        del src, dst
    return _PEAK[CUDA]


def profile(eager: Callable[[], Any], ours: Callable[[], Any], compiled_graphs: list[Any],
            options: CompileOptions, kernel_bytes: dict[str, int] | None = None
            ) -> dict[str, Any]:
    """Time `eager` against `ours` (zero-argument calls of the same graphs, the inputs bound).

    `compiled_graphs` are the CompiledGraphs `ours` runs (each kernel launch is timed).
    TorchInductor is timed after this, in the `inductor` event (`inductor_profile`).
    """
    cuda = is_gpu(options.device)
    if not options.profile:
        return {"measured": False, "reason": "profiling is off"}
    emulated = next((g.backend for g in compiled_graphs if g.backend.emulated), None)
    if emulated is not None:
        return {"measured": False, "device": emulated.device,
                "reason": f"{emulated.label} kernels ran emulated on the {emulated.device}: "
                          "their timings would mean nothing"}
    bench = _bench_cuda if cuda else _bench_cpu
    eager_ms = bench(eager)
    ours_ms = bench(ours)
    kernels = _kernel_times([(g.module, g.kernels) for g in compiled_graphs], ours, cuda)
    peak = copy_bandwidth_gbps() if cuda else None
    for k in kernels:
        nbytes = (kernel_bytes or {}).get(k["name"])
        if nbytes is not None and k["ms"]:
            k["bytes"] = nbytes
            k["gbps"] = round(nbytes / (k["ms"] * 1e-3) / 1e9, 1)
            k["pct_peak"] = round(100 * k["gbps"] / peak, 1) if peak else None
    return {"measured": True, "device": _device_name(cuda), "reason": None,
            "eager_ms": round(eager_ms, 4), "kernelscope_ms": _r(ours_ms),
            "inductor_ms": None, "peak_gbps": _r(peak), "kernels": kernels}


def inductor_profile(build: Callable[[], Callable[[], Any]], options: CompileOptions
                     ) -> dict[str, Any]:
    """TorchInductor on the same graphs: `build()` compiles them with stock torch.compile
    (a zero-argument call of them all). Its output code and kernels, and, when profiling
    is on, its time per call and each kernel's median time per launch, timed as ours are
    (Inductor's C++ kernels on the CPU, its Triton kernels on the GPU: never emulated)."""
    cuda = is_gpu(options.device)
    out, fn, modules = inductor_output(build)
    if fn is None:
        return {"measured": False, "reason": "TorchInductor failed", **out}
    if not options.profile:
        return {"measured": False, "reason": "profiling is off", **out}
    inductor_ms = (_bench_cuda if cuda else _bench_cpu)(fn)
    times = {k["name"]: k["ms"] for k in _kernel_times(modules, fn, cuda)}
    kernels = [{**k, "ms": times.get(k["name"])} for k in out["kernels"]]
    return {**out, "kernels": kernels, "measured": True, "reason": None,
            "device": _device_name(cuda), "inductor_ms": _r(inductor_ms)}


def _device_name(cuda: bool) -> str:
    return torch.cuda.get_device_name() if cuda else CPU


def _r(x: float | None) -> float | None:
    return round(x, 4) if x is not None else None


def _kernel_times(modules: list[tuple[Any, list[str]]], fn: Callable[[], Any], cuda: bool,
                  iters: int = 20) -> list[dict[str, Any]]:
    """Each kernel's median time per launch over `iters` calls of `fn`: `modules` are the
    wrapper modules `fn` runs and the kernels each looks up as globals (timing.instrument)."""
    if not modules:
        return []
    samples: dict[str, list[float]] = {}
    for _ in range(iters):
        records: dict[str, Any] = {}
        stack = []
        for module, kernel_names in modules:
            cm = instrument(module, kernel_names, events=cuda)
            records.update(cm.__enter__())
            stack.append(cm)
        try:
            fn()
            if cuda:
                torch.cuda.synchronize()
        finally:
            for cm in reversed(stack):
                cm.__exit__(None, None, None)
        for name, rec in records.items():
            samples.setdefault(name, []).extend(rec.elapsed())
    return [{"name": n, "ms": round(statistics.median(v), 4) if v else None}
            for n, v in samples.items()]
