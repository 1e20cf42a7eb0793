"""The lean launch path for Triton kernels: after the first launch, a call site calls the
compiled kernel's C launcher directly instead of the JIT's per-call binding (tens of
microseconds of Python). A wrapper's grids, blocks and warps are fixed, so only the
16-byte alignment of arguments the wrapper did not allocate (`ALIGNED`) is checked per
launch; a misaligned one, or a set launch hook, takes the JIT path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import torch

OPTION_NAMES = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion"}


class _Launch:
    """One call site: a kernel at a fixed grid, until its first direct launch works; then
    `FastKernel.sites` holds the site's closure (`direct`) instead."""

    def __init__(self, fn: Any, grid: Sequence[int], sites: dict[Any, Any],
                 aligned: frozenset[int] | None = None) -> None:
        self.fn = fn
        self.key = tuple(grid)
        self.grid = self.key + (1,) * (3 - len(self.key))
        self.sites = sites
        self.known_aligned = aligned  # argument positions the wrapper allocated itself
        self.run: Any = None  # the C launcher, once the first launch compiled the kernel
        self.function: Any = None
        self.packed: Any = None
        self.constexprs: tuple[Any, ...] = ()
        self.aligned: tuple[int, ...] = ()  # tensor arguments checked as 16-aligned
        self.device = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.run is None or len(args) != self.nargs or _hooked(_runtime().launch_enter_hook):
            return self._slow(args, kwargs)
        for i in self.aligned:
            if args[i].data_ptr() & 15:
                return self._slow(args, kwargs)
        g0, g1, g2 = self.grid
        try:  # the first direct launch: a mismatch here means this Triton's launcher
            self.run(g0, g1, g2, _stream(self.device), self.function, self.packed, None,
                     None, None, *args, *self.constexprs)  # wants other arguments
        except TypeError:
            self.run = None
            self.nargs = -2  # never prepared again
            return self.fn[self.grid](*args, **kwargs)
        self.sites[self.key] = direct(self)
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
            known = self.known_aligned or frozenset()
            self.aligned = tuple(i for i in tensors
                                 if args[i].data_ptr() % 16 == 0 and i not in known)
            self.device = args[tensors[0]].device.index if tensors else \
                torch.cuda.current_device()
            self.nargs = len(args)
            self.function, self.packed = kernel.function, kernel.packed_metadata
            self.run = kernel.run
        except Exception:  # noqa: BLE001 - an older or newer Triton: keep the JIT path
            self.run = None
            self.nargs = -2

    nargs = -1  # -1: not prepared yet; -2: this Triton cannot launch directly


def direct(site: _Launch) -> Any:
    """The call site's launch once its first direct launch worked: all it needs in closure
    cells, the per-launch checks inline (it runs hundreds of times per training step)."""
    run, function, packed, constexprs = site.run, site.function, site.packed, site.constexprs
    g0, g1, g2 = site.grid
    nargs, checked, device, slow = site.nargs, site.aligned, site.device, site._slow
    runtime, stream = _runtime(), _stream

    def launch(*args: Any, **kwargs: Any) -> Any:
        hook = runtime.launch_enter_hook  # None, or a HookChain whose `calls` may be empty
        if len(args) != nargs or (hook is not None and getattr(hook, "calls", True)):
            return slow(args, kwargs)
        for i in checked:
            if args[i].data_ptr() & 15:
                return slow(args, kwargs)
        run(g0, g1, g2, stream(device), function, packed, None, None, None, *args,
            *constexprs)
        return None

    launch.site = site  # type: ignore[attr-defined]
    return launch


def _runtime() -> Any:
    from triton import knobs

    return knobs.runtime


def _hooked(hook: Any) -> bool:
    """`knobs.runtime.launch_enter_hook` is set (None, or an empty HookChain in newer
    Tritons, when not)."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _stream(device: int) -> int:
    return torch._C._cuda_getCurrentRawStream(device)  # what Inductor's launchers use


def _on_device(t: torch.Tensor) -> bool:
    return t.is_cuda


class FastKernel:
    """Stands in for a `@triton.jit` function in a wrapper module's globals. `aligned`:
    the argument positions the wrapper always passes its own (aligned) allocations in."""

    def __init__(self, fn: Any, aligned: Sequence[int] | None = None) -> None:
        self.fn = fn
        self.aligned = frozenset(aligned) if aligned is not None else None
        self.sites: dict[Any, Any] = {}

    def __getitem__(self, grid: Sequence[int]) -> Any:
        try:  # the wrapper's grids are tuples: one dict lookup per launch
            return self.sites[grid]
        except (KeyError, TypeError):  # new, or a list (unhashable)
            key = tuple(grid)
            site = self.sites.get(key)
            if site is None:
                site = self.sites[key] = _Launch(self.fn, key, self.sites, self.aligned)
            return site

    def __getattr__(self, name: str) -> Any:  # device_caches, arg_names, ... for reports
        return getattr(self.fn, name)


def install(module: ModuleType, kernels: list[str]) -> None:
    """Wrap the module's Triton kernels once (native runs only); `ALIGNED` says which
    arguments need no check. KERNELSCOPE_LAUNCH=jit keeps the JIT path (to compare)."""
    jit = os.environ.get("KERNELSCOPE_LAUNCH") == "jit"
    aligned = getattr(module, "ALIGNED", {})
    for name in kernels:  # modules are shared by identical graphs: (un)wrap every load
        fn = getattr(module, name, None)
        if isinstance(fn, FastKernel) and jit:
            setattr(module, name, fn.fn)
        elif fn is not None and not isinstance(fn, FastKernel) and hasattr(fn, "warmup") \
                and not jit:
            setattr(module, name, FastKernel(fn, aligned.get(name)))
