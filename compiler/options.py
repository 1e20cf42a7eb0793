"""Compile options: one frozen dataclass, passed explicitly to every stage.

There is no global config module: whoever starts a compile builds a CompileOptions and
hands it down. `from_mapping` accepts the loose dicts that arrive from the CLI, the HTTP
API and `torch.compile(..., options={...})`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelscope.compiler.devices import CPU

# set by `kernelscope run` (compiler/cli.py): the trace directory of every compile that names none
TRACE_DIR_ENV = "KERNELSCOPE_TRACE_DIR"


@dataclass(frozen=True)
class CompileOptions:
    device: str = CPU  # one of compiler/devices.py's DEVICES: where the snippet's tensors live
    backend: str = "auto"  # a registered backend's name, or "auto" (codegen/backends.py)
    fusion: bool = True  # vertical and horizontal fusion in the scheduler
    memory_reuse: bool = True  # reuse dead buffers in the memory plan
    # an optimizer step's per-parameter updates, say (schedule/horizontal.py); needs fusion
    combo_kernels: bool = True  # horizontal fusion into combo (foreach) kernels
    split_reductions: bool = True  # two-kernel reductions when few outputs, long rows
    persistent_rblock: int = 4096  # rows up to this long run as persistent reductions
    inductor: bool = False  # also time torch.compile's own Inductor in `profile`
    profile: bool = True  # time eager and compiled code where that means something
    # Torch's and OpenMP's, pinned to as many cores (compiler/runtime/slot.py). One by
    # default: on a shared host an OpenMP team waits at each barrier for a preempted thread.
    threads: int = 1  # CPU threads the profile times with (0: the process's own)
    check: bool = True  # compare compiled outputs against eager in `run`
    atol: float = 1e-4  # absolute tolerance of the check against eager
    rtol: float = 1e-4  # relative tolerance of the check against eager
    attention_to_sdpa: bool = True  # naive attention -> scaled_dot_product_attention (CUDA)
    # "min_cut" recomputes cheap pointwise work in the backward (Inductor's rule), "default"
    # saves every intermediate the backward reads (capture/aot.py)
    partition: str = "min_cut"  # what a training forward saves for its backward
    cuda_graphs: bool = False  # replay each compiled graph from a CUDA graph (runtime/graphs.py)
    # "auto": where lowering/layout.py's rule says; "channels_last": wherever it can
    conv_layout: str = "auto"  # convolution graphs' layout: auto, channels_last or contiguous
    # values several consumers read: stored, or recomputed in each (lowering/realize.py)
    realize: str = "auto"  # realize rule: auto (the backend's), shared, one-read or inline-cheap
    # float16/bfloat16 results inside a Triton kernel: "round" each op's as eager does,
    # "fused" only where stored (Inductor's default; fewer conversions, not eager's bits)
    low_precision: str = "round"  # low-precision intermediates in Triton kernels
    # mm/addmm/bmm on Triton, each value's rule in runtime/autotune.py ("auto": "measure")
    matmul: str = "heuristic"  # matrix products: heuristic, measure, extern or template
    # threads building a graph's Triton kernels ahead of its first launch (0: one per
    # CPU core, at most 16); 1 builds them one after another
    compile_workers: int = 0  # threads that build a graph's GPU kernels in parallel
    cache_dir: str | None = None  # on-disk compile cache; None: ~/.cache/kernelscope
    trace_dir: str | None = None  # write each compile's trace here (kernelscope open DIR)
    entry: str | None = None  # snippet entry point override
    # False: so coverage counts only what is lowered natively
    fallback: bool = True  # an op without a lowering runs on ATen; False: the graph runs eagerly
    # Triton kernels the interpreter ran on a CPU host, compiled offline (never run here)
    gpu_target: str = "sm_90"  # GPU target of the offline Triton stages (sm_80, sm_90, ...; "" off)
    debug_index_asserts: bool = False  # check every indirect index on the device (a debug aid)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> CompileOptions:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown compile option(s): {', '.join(unknown)}")
        return cls(**dict(values))

    def workers(self) -> int:
        """Threads that build or report a graph's kernels in parallel: compile_workers,
        where 0 means one per CPU core, at most 16."""
        return max(1, self.compile_workers or min(16, os.cpu_count() or 1))

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["extra"] = dict(self.extra)
        return out
