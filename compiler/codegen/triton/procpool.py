"""Building Triton kernels in spawned worker processes that fill Triton's on-disk cache
(as Inductor's SubprocPool does): Triton's compile holds the GIL, so threads overlap only
ptxas. A worker binds each launch as triton/offline.py does and compiles it into the
parent's TRITON_CACHE_DIR, where the parent's own build then hits.

The pool only warms a cache: a failed job, a dead worker or a timeout leaves the kernel
to the parent's compile, and the result says so (`fallback`); a broken pool restarts.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen.triton.cache import CACHE_ENV

JOB_TIMEOUT_S = 300.0
INTERPRET_ENV = "TRITON_INTERPRET"


@dataclass(frozen=True)
class CompileJob:
    """One kernel to compile; `launch` as offline.describe_launch writes it."""

    wrapper: str
    kernel: str
    launch: dict[str, Any]
    capability: int  # 90 for sm_90
    cache_dir: str


def compile_job(job: CompileJob) -> float:
    """The worker's side: the kernel compiled into `job.cache_dir`; milliseconds taken."""
    start = time.perf_counter()
    before = {name: os.environ.get(name) for name in (INTERPRET_ENV, CACHE_ENV)}
    os.environ.pop(INTERPRET_ENV, None)  # Triton reads it when the wrapper's @jit runs
    os.environ[CACHE_ENV] = job.cache_dir  # and this at each compile
    try:
        from kernelscope.compiler.codegen.triton.offline import _compile, _jit_module

        module = _jit_module(Path(job.wrapper))
        _compile(getattr(module, job.kernel), job.launch, job.capability)
    finally:  # the worker serves the next job as it was started
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return (time.perf_counter() - start) * 1000


class CompilePool:
    """`workers` spawned processes, started at the first build and kept warm after it."""

    def __init__(self, workers: int, timeout_s: float = JOB_TIMEOUT_S) -> None:
        self.workers = max(1, workers)
        self.timeout_s = timeout_s
        self._executor: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def build(self, jobs: list[CompileJob]) -> dict[str, Any]:
        start = time.perf_counter()
        built: dict[str, float] = {}
        fallback: dict[str, str] = {}
        with self._lock:
            futures: list[tuple[CompileJob, Future[float]]] = []
            try:
                executor = self._start()
                futures = [(j, executor.submit(compile_job, j)) for j in jobs]
            except (OSError, RuntimeError, BrokenProcessPool) as e:
                fallback = {j.kernel: f"no compile workers ({type(e).__name__}: {e}): "
                            "built in process" for j in jobs}
            deadline = time.monotonic() + self.timeout_s
            broken = False
            for job, future in futures:
                try:
                    left = max(0.0, deadline - time.monotonic())
                    built[job.kernel] = round(future.result(timeout=left), 3)
                except FutureTimeout:
                    broken = True
                    fallback[job.kernel] = (f"the compile worker timed out after "
                                            f"{self.timeout_s:g} s: built in process")
                except BrokenProcessPool:
                    broken = True
                    fallback[job.kernel] = "a compile worker died: built in process"
                except Exception as e:  # the parent's compile raises it again, or not
                    fallback[job.kernel] = (f"{type(e).__name__}: {str(e)[:200]}: "
                                            "built in process")
            if broken:
                self._stop()
        return {"processes": self.workers, "kernels": len(jobs), "built_ms": built,
                "fallback": fallback, "ms": round((time.perf_counter() - start) * 1000, 3)}

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self._executor

    def _stop(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        # The executor cannot stop a worker stuck in a build: kill its processes.
        procs = list((getattr(executor, "_processes", None) or {}).values())
        executor.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.kill()
        for p in procs:
            p.join(5)


class Pools:
    """The process's compile pools, one per size, closed at exit (they outlive backends)."""

    def __init__(self) -> None:
        self._pools: dict[int, CompilePool] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self, workers: int) -> CompilePool:
        with self._lock:
            return self._pools.setdefault(workers, CompilePool(workers))

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


POOLS = Pools()


def fresh_cache(folder: str) -> bool:
    """Whether a Triton cache folder holds no build yet (missing or empty)."""
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except OSError:
        return True
