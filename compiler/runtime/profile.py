"""Whole-call timing and TorchInductor's side of the `profile` measurements.

Timing follows the usual rules: warm up first, take medians over repeats with their
spread (runtime/stats.py), synchronize the device. On a GPU: `triton.testing.do_bench`
for whole calls; achieved bandwidth against a measured device-to-device copy. On the CPU a
wall clock over batches. Our own call's rows are compiler/profiling.py's. TorchInductor
(the `inductor` event, after our result) is timed the same way, its kernels through
proxies swapped into the modules it generated (CUDA events per launch on a GPU).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from kernelscope.compiler.devices import CPU, CUDA, is_gpu
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime import stats
from kernelscope.compiler.runtime.inductor import Graphs, inductor_output
from kernelscope.compiler.runtime.slot import timing_slot, torch_threads
from kernelscope.compiler.runtime.timing import instrument
from kernelscope.compiler.runtime.torch_profile import peak_bytes


def bench_samples(fn: Callable[[], Any], cuda: bool,
                  clock: stats.Clock = time.perf_counter_ns) -> list[float]:
    """Per-call milliseconds of `fn`, one sample per repeat (runtime/stats.py): on a GPU
    each of triton's do_bench calls (CUDA events), on the CPU the median of a batch as
    `clock` reads it."""
    if not cuda:
        return stats.repeats(fn, clock=clock)
    import triton.testing

    return [float(x) for x in triton.testing.do_bench(fn, warmup=25, rep=100,
                                                      return_mode="all")]


_PEAK: dict[str, float] = {}


def copy_bandwidth_gbps() -> float:
    """Device-to-device copy bandwidth (bytes read + written), measured once."""
    if CUDA not in _PEAK:
        n = 256 * 1024 * 1024 // 4
        src = torch.empty(n, device=CUDA)
        dst = torch.empty_like(src)
        ms = statistics.median(bench_samples(lambda: dst.copy_(src), cuda=True))
        _PEAK[CUDA] = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9
        del src, dst
    return _PEAK[CUDA]


def inductor_profile(build: Callable[[Graphs], Callable[[], Any]], options: CompileOptions
                     ) -> dict[str, Any]:
    """TorchInductor on the same graphs: `build()` compiles them with stock torch.compile
    (a zero-argument call of them all). Its output code and kernels, and, when profiling
    is on, its time per call and each kernel's median time per launch, timed as ours are
    (Inductor's C++ kernels on the CPU, its Triton kernels on the GPU: never emulated)."""
    cuda = is_gpu(options.device)
    with torch_threads(options.threads if not cuda else 0):
        out, fn, modules = inductor_output(build)
        if fn is None:
            return {"measured": False, "reason": "TorchInductor failed", **out}
        if not options.profile:
            return {"measured": False, "reason": "profiling is off", **out}
        return _timed_inductor(out, fn, modules, options, cuda)


def _timed_inductor(out: dict[str, Any], fn: Callable[[], Any], modules: Any,
                    options: CompileOptions, cuda: bool) -> dict[str, Any]:
    with timing_slot(options.threads, cpu=not cuda) as facts:
        spread = stats.spread(bench_samples(fn, cuda, stats.clock_for(facts["threads"])[0]))
        times = {k["name"]: k["ms"] for k in _kernel_times(modules, fn, cuda)}
        peak = peak_bytes(fn, cuda)
    kernels = [{**k, "ms": times.get(k["name"])} for k in out["kernels"]]
    return {**out, "kernels": kernels, "measured": True, "reason": None,
            "device": torch.cuda.get_device_name() if cuda else CPU,
            "inductor_ms": spread["ms"], "inductor_time": spread, "peak_bytes": peak}


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
