"""The conditions a timing runs under: one timing at a time on the host, threads set and
pinned, the host's load written down.

In: the thread count asked for (0: the process's own), and where the server keeps the
host's timing lock (the KERNELSCOPE_TIMING_LOCK environment variable, which the server
sets for its workers: server/runtime.py). Out: a `with` block inside which the `profile`
stage times, and the facts it records (events/results.py `TimingConditions`).

Why: on a shared CPU host, jobs that time at once take each other's cores, and an OpenMP
team whose threads are preempted waits at every barrier (a 7 us matrix product measured
at 150 ms). So: the lock (fcntl.flock on a file every worker opens on its own) admits one
timing at a time across the server's worker processes; every thread of the process is
pinned to the `threads` CPUs that were idle longest over the last 0.1 s, so the OpenMP
team neither migrates nor outnumbers its cores, and sits where other jobs are not; the
load average is read before and after. A lock that another process holds too long
(WAIT_S) is given up on, and the figure says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from typing import Any

from kernelscope.compiler.devices import CPU

# torch is imported where threads are set: the server reads LOCK_ENV without importing it
LOCK_ENV = "KERNELSCOPE_TIMING_LOCK"
WAIT_S = 60.0


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


@contextlib.contextmanager
def _locked(path: str | None, wait_s: float) -> Iterator[str]:
    """Hold the host's timing lock at `path`; yields how (the figure's `slot`)."""
    if not path:
        yield "none (no server lock: this process timed alone)"
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        yield f"none (the lock could not be opened: {e.strerror})"
        return
    try:
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start > wait_s:
                    yield f"not held (another timing held the lock over {wait_s:.0f} s)"
                    return
                time.sleep(0.02)
        waited = time.monotonic() - start
        yield "held" if waited < 0.05 else f"held after waiting {waited:.1f} s"
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _idle_ticks() -> dict[int, int]:
    """Idle plus iowait ticks of each CPU so far (/proc/stat)."""
    out = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith(CPU) and name != CPU:
                    out[int(name[3:])] = int(fields[3]) + int(fields[4])
    except (OSError, ValueError, IndexError):
        return {}
    return out


def idlest(allowed: list[int], n: int, window_s: float = 0.1) -> list[int]:
    """The `n` CPUs of `allowed` that were idle longest over the last `window_s`: where
    the timing is pinned, away from the cores other jobs keep busy. When `n` takes them
    all there is no choice to make, and no window to wait (0.1 s of a profile that times
    with every CPU; a job's default of 1 thread on 2 CPUs still chooses)."""
    if n >= len(allowed):
        return sorted(allowed)
    before = _idle_ticks()
    time.sleep(window_s)
    after = _idle_ticks()
    idle = {c: after.get(c, 0) - before.get(c, 0) for c in allowed}
    return sorted(sorted(allowed, key=lambda c: -idle[c])[:n])


def _tasks() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


@contextlib.contextmanager
def _pinned(cpus: list[int]) -> Iterator[list[int]]:
    """Every thread of this process (OpenMP's team too) on `cpus`, then back."""
    saved: dict[int, set[int]] = {}
    if not cpus:
        yield []
        return
    try:
        for tid in _tasks():
            with contextlib.suppress(OSError):
                saved[tid] = os.sched_getaffinity(tid)
                os.sched_setaffinity(tid, cpus)
        yield cpus if saved else []
    finally:
        for tid, mask in saved.items():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[int]:
    """torch's (and OpenMP's) thread count set to `threads` (0: as it is) in the block.
    Inductor bakes the count into the kernels it builds, so it builds under this too."""
    import torch

    before = torch.get_num_threads()
    want = min(threads or before, len(os.sched_getaffinity(0)))
    torch.set_num_threads(want)
    try:
        yield want
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def timing_slot(threads: int, cpu: bool, wait_s: float = WAIT_S
                ) -> Iterator[dict[str, Any]]:
    """Time inside this block; the dict it yields is filled with the conditions (its
    `load_after` when the block ends). `threads` 0 keeps torch's thread count; on a GPU
    (`cpu` false) threads are neither set nor pinned (the device times itself)."""
    import torch

    before = torch.get_num_threads()
    allowed = sorted(os.sched_getaffinity(0))
    want = min(threads or before, len(allowed))  # never more threads than cores
    facts: dict[str, Any] = {"threads": want if cpu else None, "cpus": [],
                             "load_before": [], "load_after": [], "slot": "", "clock": ""}
    with _locked(os.environ.get(LOCK_ENV), wait_s) as how:
        facts["slot"], facts["load_before"] = how, _load()
        try:
            if cpu:
                torch.set_num_threads(want)
            with _pinned(idlest(allowed, want) if cpu else []) as cpus:
                facts["cpus"] = cpus
                yield facts
        finally:
            torch.set_num_threads(before)
            facts["load_after"] = _load()
