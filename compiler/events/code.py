"""The payloads of the code stages: `codegen` and `compile`.

Part of the typed event model: compiler/events/types.py gathers every stage's payload."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


# -- codegen -------------------------------------------------------------------------------
@dataclass
class KernelLine:
    line: int
    origins: list[str]
    lines: list[int]
    buffers: list[str] = field(default_factory=list)


@dataclass
class GeneratedKernel:
    name: str
    language: str
    source: str
    line_map: list[KernelLine]
    target: str = ""
    module: str | None = None  # as the scheduled kernel's
    modules: list[str] = field(default_factory=list)


@dataclass
class WrapperLine:
    line: int
    kernel: str | None = None


@dataclass
class Wrapper:
    source: str
    line_map: list[WrapperLine]


@dataclass
class CodegenGraph:
    id: int
    backend: str
    kernels: list[GeneratedKernel]
    wrapper: Wrapper
    backend_label: str = ""
    emulated: bool = False
    triton_interpret: bool = False


@dataclass
class Codegen:
    graphs: list[CodegenGraph]


# -- compile -------------------------------------------------------------------------------
@dataclass
class StageLines:
    """Lines first..last (1-based, inclusive) of one lower stage's text, all made from
    the same lines of the kernel's source (its debug locations)."""

    first: int
    last: int
    kernel_lines: list[int]


@dataclass
class BuiltKernel:
    name: str
    ms: float | None
    cache_hit: bool = False
    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    # the backend's lower stages: Triton's ttir/ttgir/llir/ptx/sass on a GPU, C++'s asm
    ir: dict[str, str] | None = None
    line_maps: dict[str, list[StageLines]] | None = None  # stage -> its mapped lines
    # the GPU target the stages were compiled for offline, never run here (a CPU host
    # whose interpreter ran the kernel); None: the build that ran
    gpu_target: str | None = None
    stages_note: str | None = None  # why a kernel has no lower stages


@dataclass
class CompileGraph:
    id: int
    ms: float
    cache_hit: bool
    kernels: list[BuiltKernel]
    path: str = ""
    build_ms: float = 0.0
    # the whole-graph cache (compiler/runtime/graph_cache.py): key, status (hit, miss,
    # stale, bypass) and why; empty when it was not asked
    graph_cache: dict[str, Any] = field(default_factory=dict)
    # the kernels built ahead of the first launch in the compile pool (triton_pool.py):
    # workers, kernels, ms, built_ms per kernel, errors; empty where nothing was
    prebuild: dict[str, Any] = field(default_factory=dict)


@dataclass
class Compile:
    graphs: list[CompileGraph]


@dataclass
class GpuStages:
    """The `gpu_stages` follow-up: each graph's kernels (by name, as in `compile`) with the
    lower stages Triton compiled offline for `gpu_target` (ir, line_maps, registers, ...);
    a graph's `ms` is the time that took, `cache_hit` that every report was kept."""

    graphs: list[CompileGraph]
