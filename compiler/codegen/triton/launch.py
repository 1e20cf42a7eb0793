"""The lean launch path for Triton kernels: after the first launch, call the compiled
kernel's launcher directly instead of the JIT's per-call path.

`kernel[grid](*args, XBLOCK=..., num_warps=...)` through `triton.JITFunction` binds the
arguments, computes the specialization key and looks the kernel up on every call (tens of
microseconds of Python). A wrapper's grid, block sizes and warps are fixed when it is
generated, so after the first (JIT) launch `FastKernel` keeps the `CompiledKernel` and
launches it with one call into Triton's C launcher: grid, function handle, metadata and
constexpr values are looked up once. Each call still checks what the compiled kernel was
specialized on that can change between calls (16-byte alignment of tensor arguments) and
takes the JIT path when it differs; the JIT path is also taken when a launch hook is set
(a profiler wants launch metadata) and under the Triton interpreter.

In: the module globals the wrapper launches through. Out: the same globals, wrapped.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch

OPTION_NAMES = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion"}


class _Launch:
    """One call site: a kernel at a fixed grid."""

    def __init__(self, fn: Any, grid: Sequence[int]) -> None:
        self.fn = fn
        self.grid = tuple(grid) + (1,) * (3 - len(grid))
        self.run: Any = None  # the C launcher, once the first launch compiled the kernel
        self.function: Any = None
        self.packed: Any = None
        self.constexprs: tuple[Any, ...] = ()
        self.aligned: tuple[int, ...] = ()  # tensor arguments specialized as 16-aligned
        self.device = 0
        self.knobs: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Every check is inline and loops without a generator: this runs once per kernel
        # launch (hundreds per training step, where the host bounds the step).
        run = self.run
        if run is None or len(args) != self.nargs:
            return self._slow(args, kwargs)
        hook = self.knobs.launch_enter_hook
        if hook is not None and _hooked(hook):
            return self._slow(args, kwargs)
        for i in self.aligned:
            if args[i].data_ptr() & 15:
                return self._slow(args, kwargs)
        g0, g1, g2 = self.grid
        if not self.proven:  # the first direct launch: a mismatch here means this Triton's
            try:             # launcher wants other arguments; keep the JIT path then
                run(g0, g1, g2, _stream(self.device), self.function, self.packed, None, None,
                    None, *args, *self.constexprs)
            except TypeError:
                self.run = None
                self.nargs = -2  # never prepared again
                return self.fn[self.grid](*args, **kwargs)
            self.proven = True
            return None
        run(g0, g1, g2, _stream(self.device), self.function, self.packed, None, None, None,
            *args, *self.constexprs)
        return None

    def _slow(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        out = self.fn[self.grid](*args, **kwargs)
        if self.run is None and self.nargs == -1:
            self._prepare(args, kwargs)
        return out

    def _prepare(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Keep the compiled kernel the JIT just launched, if this Triton allows it."""
        self.nargs = -2  # until it is known to work
        try:
            from triton import knobs

            kernel = self.fn.warmup(*args, grid=self.grid, **kwargs)
            if hasattr(kernel, "result"):
                kernel = kernel.result()
            kernel._init_handles()
            names = list(self.fn.arg_names)
            rest = names[len(args):]
            if any(k not in rest and k not in OPTION_NAMES for k in kwargs):
                return
            if any(n not in kwargs for n in rest):
                return  # a default value: let the JIT bind it
            tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
            if any(not _on_device(args[i]) for i in tensors):
                return
            self.constexprs = tuple(kwargs[n] for n in rest)
            self.aligned = tuple(i for i in tensors if args[i].data_ptr() % 16 == 0)
            self.device = args[tensors[0]].device.index if tensors else \
                torch.cuda.current_device()
            self.nargs = len(args)
            self.function, self.packed = kernel.function, kernel.packed_metadata
            self.knobs = knobs.runtime
            self.run = kernel.run
        except Exception:  # noqa: BLE001 - an older or newer Triton: keep the JIT path
            self.run = None
            self.nargs = -2

    nargs = -1  # -1: not prepared yet; -2: this Triton cannot launch directly
    proven = False


def _hooked(hook: Any) -> bool:
    """`knobs.runtime.launch_enter_hook` is set (None, or an empty HookChain in newer
    Tritons, when not)."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _stream(device: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device)  # what Inductor's launchers use


def _on_device(t: torch.Tensor) -> bool:
    return t.is_cuda


class FastKernel:
    """Stands in for a `@triton.jit` function in a wrapper module's globals."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.sites: dict[tuple[int, ...], _Launch] = {}

    def __getitem__(self, grid: Sequence[int]) -> _Launch:
        try:  # the wrapper's grids are tuples: one dict lookup per launch
            return self.sites[grid]  # type: ignore[index]
        except (KeyError, TypeError):  # new, or a list (unhashable)
            key = tuple(grid)
            site = self.sites.get(key)
            if site is None:
                site = self.sites[key] = _Launch(self.fn, key)
            return site

    def __getattr__(self, name: str) -> Any:  # device_caches, arg_names, ... for reports
        return getattr(self.fn, name)


def install(module: ModuleType, kernels: list[str]) -> None:
    """Wrap the module's Triton kernels (once; TritonBackend.after_import calls it where
    the kernels run natively: the interpreter keeps the JIT path, which it implements).
    KERNELSCOPE_LAUNCH=jit keeps the JIT path everywhere (to compare the two, as
    benchmarks' call_us probe does)."""
    jit = os.environ.get("KERNELSCOPE_LAUNCH") == "jit"
    for name in kernels:  # modules are shared by identical graphs: (un)wrap every load
        fn = getattr(module, name, None)
        if isinstance(fn, FastKernel) and jit:
            setattr(module, name, fn.fn)
        elif fn is not None and not isinstance(fn, FastKernel) and hasattr(fn, "warmup") \
                and not jit:
            setattr(module, name, FastKernel(fn))
