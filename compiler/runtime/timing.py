"""Timing kernels in place: proxies swapped into a wrapper module's globals.

The wrapper looks kernels up as module globals at call time, so replacing them with
proxies (for one call, then putting them back) times each launch without touching the
generated code. On CUDA a launch is bracketed by events; on the CPU by a clock.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch


@dataclass
class KernelTiming:
    name: str
    calls: list[float] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[Any, Any]] = field(default_factory=list)
    # the first launch's arguments (a backend's report may compile the kernel again for
    # another target with them: compiler/codegen/triton/offline.py)
    launch: tuple[tuple[Any, ...], dict[str, Any]] | None = None

    def elapsed(self) -> list[float]:
        """Milliseconds per launch (call after synchronizing when events were used)."""
        return self.calls + [a.elapsed_time(b) for a, b in self.events]

    def to_json(self) -> dict[str, Any]:
        first = self.calls[0] if self.calls else None
        return {"name": self.name, "ms": round(first, 3) if first is not None else None,
                **self.info}


class KernelLaunchError(RuntimeError):
    """A kernel failed to compile or launch; names the kernel."""

    def __init__(self, kernel: str, error: BaseException) -> None:
        super().__init__(f"kernel {kernel} failed: {type(error).__name__}: {error}")
        self.kernel = kernel


class _Timed:
    def __init__(self, fn: Any, record: KernelTiming, cuda: bool, events: bool) -> None:
        self.fn, self.record, self.cuda, self.events = fn, record, cuda, events

    def __getitem__(self, grid: Any) -> Any:
        launcher = self.fn[grid]

        def run(*args: Any, **kwargs: Any) -> Any:
            return self._time(launcher, args, kwargs)

        return run

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._time(self.fn, args, kwargs)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """A launch the way Inductor's output code makes one (`kernel.run(..., stream=s)`)."""
        return self._time(self.fn.run, args, kwargs)

    def _time(self, fn: Any, args: Any, kwargs: Any) -> Any:
        try:
            return self._timed_call(fn, args, kwargs)
        except KernelLaunchError:
            raise
        except Exception as e:  # Triton compile errors surface at the first launch
            raise KernelLaunchError(self.record.name, e) from e

    def _timed_call(self, fn: Any, args: Any, kwargs: Any) -> Any:
        if self.record.launch is None:
            self.record.launch = (tuple(args), dict(kwargs))
        if self.events:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = fn(*args, **kwargs)
            end.record()
            self.record.events.append((start, end))
            return result
        if self.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        if self.cuda:
            torch.cuda.synchronize()
        self.record.calls.append((time.perf_counter() - t0) * 1000)
        if result is not None and not self.record.info:
            self.record.info = _compiled_info(result)
        return result


def _compiled_info(result: Any) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for key, attr in (("registers", "n_regs"), ("spills", "n_spills")):
        value = getattr(result, attr, None)
        if isinstance(value, int):
            info[key] = value
    shared = getattr(getattr(result, "metadata", None), "shared", None)
    if isinstance(shared, int):
        info["shared_bytes"] = shared
    return info


@contextlib.contextmanager
def instrument(module: ModuleType, names: list[str], events: bool = False
               ) -> Iterator[dict[str, KernelTiming]]:
    """Swap kernels for timing proxies; `events`: CUDA events, no sync per launch."""
    cuda = torch.cuda.is_available()
    saved = {n: getattr(module, n) for n in names if hasattr(module, n)}
    records = {n: KernelTiming(n) for n in saved}
    try:
        for n, fn in saved.items():
            setattr(module, n, _Timed(fn, records[n], cuda, events and cuda))
        yield records
    finally:
        for n, fn in saved.items():
            setattr(module, n, fn)
