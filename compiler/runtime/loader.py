"""Write generated code to the cache, build it, import it, and call it.

A graph's wrapper becomes a module file `graph_<key>.py` (Triton needs its kernels in a
real file); what the backend builds ahead (C++ kernels) becomes `kernels_<key>.cpp`,
built by the backend next to it. `CompiledGraph` is the callable that torch.compile gets
back.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelscope.compiler.codegen.backend import Backend, BuildResult, Launch
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime.cache import (
    cache_root,
    content_key,
    device_name,
    write_atomic,
    write_once,
)
from kernelscope.compiler.runtime.graph_cache import compiler_source_hash
from kernelscope.compiler.runtime.results import read_result, result_path
from kernelscope.compiler.runtime.timing import instrument


@dataclass
class CompiledGraph:
    module: ModuleType
    path: Path
    cache_hit: bool
    ms: float
    build_ms: float
    backend: Backend
    kernels: list[str] = field(default_factory=list)  # the module's kernel names
    constants: tuple[Any, ...] = ()  # graph constants, the wrapper's last inputs
    # each kernel's first launch (its arguments), kept for reports made after the result
    launches: dict[str, Launch | None] = field(default_factory=dict)
    graph_cache: dict[str, Any] = field(default_factory=dict)  # GraphCacheStatus.to_json()

    def __call__(self, *args: Any) -> list[Any]:
        return list(self.module.call([*args, *self.constants]))


def _source_path(build_source: str, backend: Backend, options: CompileOptions) -> Path:
    root = cache_root(options.cache_dir)
    return root / f"kernels_{content_key(build_source)}{backend.source_suffix}"


def source_path(build_source: str, backend: Backend, options: CompileOptions) -> Path | None:
    """Where the source the backend builds is written (None when nothing is built)."""
    return _source_path(build_source, backend, options) if build_source else None


def artifact_path(build_source: str, backend: Backend, options: CompileOptions
                  ) -> Path | None:
    """Where the backend's build of `build_source` will be (the wrapper loads it)."""
    if not build_source:
        return None
    return backend.artifact_path(_source_path(build_source, backend, options))


def build_ahead(build_source: str, builder: Backend, options: CompileOptions) -> BuildResult:
    """Write what `builder` builds ahead (C++ kernels) and build it: the part of loading a
    graph that may run beside other graphs' (g++ is a process of its own)."""
    src = None
    if build_source:
        src = _source_path(build_source, builder, options)
        write_once(src, build_source)
    return builder.build(src)


def load_graph(wrapper: str, build_source: str, backend: Backend, options: CompileOptions,
               kernels: list[str], constants: Sequence[Any] = (),
               builder: Backend | None = None, built: BuildResult | None = None
               ) -> CompiledGraph:
    """`backend` is the graph's; `builder` the one of its backends that builds
    `build_source` ahead (the graph's own unless another device's kernels are C++);
    `built`: that build, already done (`build_ahead`)."""
    start = time.perf_counter()
    root = cache_root(options.cache_dir)
    builder = builder or backend
    result = built if built is not None else build_ahead(build_source, builder, options)
    if builder is not backend:
        backend.build(None)
    path = root / f"graph_{content_key(wrapper, backend.name)}.py"
    hit = write_once(path, wrapper) and result.cache_hit
    return _loaded(path, hit, start, result.ms, backend, kernels, constants)


def load_built(wrapper: Path, source: Path | None, backend: Backend, kernels: list[str],
               constants: Sequence[Any]) -> CompiledGraph:
    """A graph whose wrapper (and the source of its library) the whole-graph cache found
    and verified: nothing is generated; the backend finds its build done."""
    start = time.perf_counter()
    result = backend.build(source)
    return _loaded(wrapper, result.cache_hit, start, result.ms, backend, kernels, constants)


def _loaded(path: Path, hit: bool, start: float, build_ms: float, backend: Backend,
            kernels: list[str], constants: Sequence[Any]) -> CompiledGraph:
    module = _import(path, f"kernelscope_{path.stem}")
    backend.after_import(module, kernels)
    return CompiledGraph(module, path, hit, (time.perf_counter() - start) * 1000, build_ms,
                         backend, kernels, tuple(constants))


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
    return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype,
                               device=t.device).zero_()


def input_specs(args: list[Any]) -> list[dict[str, Any]] | None:
    """Plain data that `from_specs` makes the same zero-filled arguments from (None when
    an argument is neither a tensor nor a number)."""
    specs: list[dict[str, Any]] = []
    for a in args:
        if isinstance(a, torch.Tensor):
            specs.append({"shape": list(a.shape), "stride": list(a.stride()),
                          "dtype": str(a.dtype).removeprefix("torch."), "device": a.device.type})
        elif isinstance(a, bool | int | float):
            specs.append({"value": a})
        else:
            return None
    return specs


def from_specs(specs: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for s in specs:
        if "value" in s:
            out.append(s["value"])
            continue
        dtype = getattr(torch, str(s["dtype"]))
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"not a dtype: {s['dtype']!r}")
        out.append(torch.empty_strided(tuple(s["shape"]), tuple(s["stride"]), dtype=dtype,
                                       device=s["device"]).zero_())
    return out


def real_inputs(example_inputs: list[Any]) -> list[Any]:
    """Zero-filled tensors shaped like the (possibly fake) example inputs."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return [zeros_like_spec(t) for t in example_inputs]


def warmup(compiled: CompiledGraph, example_inputs: list[Any]) -> list[dict[str, Any]]:
    """Run once on zeros, timing each kernel's first launch (Triton JIT-compiles here),
    then ask the backend what its build knows about each kernel. A kernel's `cache_hit`:
    its graph built nothing and its report was kept from an earlier compile."""
    args = real_inputs(example_inputs)
    with compiled.backend.first_launch(compiled.path, input_specs(args)), \
            instrument(compiled.module, compiled.kernels) as timings:
        compiled(*args)
    launches = {t.name: t.launch for t in timings.values()}
    later = compiled.backend.reports_later()
    if later is not None:  # the gpu_stages follow-up makes them (`later_reports`)
        compiled.launches = launches
        reports, kept = {name: {"stages_note": later} for name in launches}, False
    else:
        reports, kept = _reports(compiled, launches)
    return [{**t.to_json(), **reports.get(t.name, {}), "cache_hit": compiled.cache_hit and kept}
            for t in timings.values()]


def later_reports(compiled: CompiledGraph) -> tuple[dict[str, dict[str, Any]], bool]:
    """The reports `warmup` left for after the result (the backend's `reports_later`),
    from the first launches it kept; True when every one was kept from an earlier compile."""
    if compiled.backend.reports_later() is None:
        return {}, True
    return _reports(compiled, compiled.launches)


def _reports(compiled: CompiledGraph, launches: dict[str, Launch | None]
             ) -> tuple[dict[str, dict[str, Any]], bool]:
    """The backend's report of each kernel (Triton's stages compiled offline, nvdisasm's
    SASS, objdump's assembly), kept on disk (runtime/results.py) under everything it
    depends on: the wrapper (its name is its content's hash), what of each launch
    specializes the build (the backend says), the backend, its options, the device and
    the compiler's source. A report with a note (nothing to show, or a failure) is made
    again next time."""
    backend = compiled.backend
    facts = {"launches": {n: backend.report_facts(x) for n, x in sorted(launches.items())},
             "backend": backend.cache_identity(), "gpu_target": backend.options.gpu_target,
             "device": device_name(backend.device), "compiler": compiler_source_hash()}
    key = content_key(compiled.path.name, json.dumps(facts, sort_keys=True, default=str))
    path = result_path(cache_root(backend.options.cache_dir), "stages", key)
    kept = read_result(path)
    if kept is not None and set(kept) == set(launches):
        return kept, True
    reports = backend.kernel_reports(compiled.module, launches)
    if reports and all(r and "stages_note" not in r for r in reports.values()):
        try:
            write_atomic(path, json.dumps(reports, sort_keys=True))
        except OSError:  # not kept: made again next time
            pass
    return reports, False

