"""Timing and kernel counting, the same way for eager, Kernelscope and Inductor.

On a GPU, time is triton.testing.do_bench's median (it flushes L2 between calls), and
kernels are the CUDA kernel events torch.profiler records per call. On a CPU, time is
torch.utils.benchmark's median (blocked_autorange over `rep` ms) and kernels are not
counted.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

ROUNDS = 5  # interleaved timing rounds per column (run.py's --rounds default)


def median_ms(fn: Callable[[], Any], device: str, warmup: int = 25, rep: int = 100) -> float:
    """Median milliseconds per call; warmup and rep are milliseconds, as in do_bench."""
    if device.startswith("cuda"):
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    return _cpu_median_ms(fn, warmup, rep)


def interleaved(calls: dict[str, Callable[[], Any]], device: str, warmup: int, rep: int,
                rounds: int) -> dict[str, dict[str, Any]]:
    """Each call timed once per round (median_ms), in turn, `rounds` times: per call the
    median of its rounds as "ms", the fastest and slowest round as "spread", the count as
    "rounds". A host that moves shows in every column's spread, not in one column."""
    times: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(rounds):
        for label, fn in calls.items():
            times[label].append(median_ms(fn, device, warmup, rep))
    return {label: {"ms": sorted(ts)[len(ts) // 2], "spread": [min(ts), max(ts)],
                    "rounds": len(ts)} for label, ts in times.items()}


def _cpu_median_ms(fn: Callable[[], Any], warmup: int, rep: int) -> float:
    from torch.utils.benchmark import Timer

    fn()
    start = time.perf_counter()
    while (time.perf_counter() - start) * 1e3 < warmup:
        fn()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=rep / 1e3).median * 1e3)


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def count_kernels(fn: Callable[[], Any], device: str, calls: int = 3) -> int | None:
    """CUDA kernels launched per call (copies and memsets not counted); None off the GPU."""
    if not device.startswith("cuda"):
        return None
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with warnings.catch_warnings():  # "Profiler clears events at the end of each cycle"
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
    kernels = [
        e
        for e in prof.events()
        if e.device_type == DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset"))
    ]
    return round(len(kernels) / calls)
