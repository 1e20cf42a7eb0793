"""The record one graph carries through the stages (compile_fx.py's `lower`, `schedule_stage`,
... `build_stage`), and where a graph's tensors live.

In: an FX graph of ATen ops, its example inputs and the compile options. Out: a `GraphWork`
that each stage fills in (the lowered graph, the schedule, the memory plan, the kernels,
the wrapper, the compiled graph) and reads from, with the FX node -> source line and module
maps the events name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.capture.fxgraph import node_lines
from kernelscope.compiler.capture.modules import node_module, origin_modules
from kernelscope.compiler.codegen.backend import Backend, GeneratedKernel
from kernelscope.compiler.devices import combined, device_type
from kernelscope.compiler.ir.opnames import op_short
from kernelscope.compiler.lowering.graph import LoweredGraph
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime import graph_cache, loader
from kernelscope.compiler.schedule.memory import MemoryPlan
from kernelscope.compiler.schedule.scheduler import Schedule


@dataclass
class GraphWork:
    gid: int
    gm: torch.fx.GraphModule
    example_inputs: list[Any]
    options: CompileOptions
    filename: str | None = None
    code_lines: list[str] = field(default_factory=list)
    kind: str | None = None  # "forward", "backward" or "inference" (AOTAutograd's compiler)
    # Outputs (by position) that may keep the graph's layout: a training forward's saved
    # activations, whose strides are reported to AOTAutograd (`saved_outputs`).
    free_outputs: frozenset[int] = frozenset()
    lines: dict[str, int | None] = field(default_factory=dict)
    modules: dict[str, str | None] = field(default_factory=dict)  # FX node -> module path
    op_names: dict[str, str] = field(default_factory=dict)
    backend: Backend | None = None  # chosen once, in `lower`
    # The backend of each device the kernels run on (the graph's own for its device;
    # codegen/backends.py kernel_backends), chosen in `lower` from the lowered buffers.
    backends: dict[str, Backend] = field(default_factory=dict)
    lowered: LoweredGraph | None = None
    sched: Schedule | None = None
    memory: MemoryPlan | None = None
    kernels: list[GeneratedKernel] = field(default_factory=list)
    wrapper: str = ""
    wrapper_line_map: list[dict[str, Any]] = field(default_factory=list)
    build_source: str = ""  # what the backend builds before the first launch
    first_step: int = 0  # where its kernels' numbers start (after the trace's earlier graphs)
    compiled: loader.CompiledGraph | None = None
    notes: list[str] = field(default_factory=list)  # what the UI should know (lowering event)
    mutations: dict[int, int] = field(default_factory=dict)  # output -> input it updates
    position: dict[str, int] = field(default_factory=dict)  # FX node name -> program order
    graph_cache: graph_cache.GraphCacheStatus | None = None  # what the whole-graph cache did

    def __post_init__(self) -> None:
        self.lines = node_lines(self.gm, self.filename)
        self.modules = {n.name: node_module(n.meta) for n in self.gm.graph.nodes}
        self.op_names = {n.name: op_short(n.target) for n in self.gm.graph.nodes
                         if n.op == "call_function"}
        self.position = {n.name: i for i, n in enumerate(self.gm.graph.nodes)}

    def kernels_of(self, backend: Backend) -> list[GeneratedKernel]:
        """The kernels `backend` generated: those whose buffers live on its device (a
        mixed-device graph's CPU kernels are C++, built with the graph's library)."""
        assert self.sched is not None
        buffers = self.sched.buffers
        return [k for k in self.kernels if all(buffers[a].device == backend.device
                                               for a in k.args)]

    def describe_origins(self, origins: Sequence[str]) -> str:
        """FX nodes in program order, grouped by source line, each line quoted once:
        `mul, add (line 3: y = x * 2 + 1); relu (line 4: ...)`."""
        position = self.position
        by_line: dict[int | None, list[str]] = {}
        for name in sorted(origins, key=lambda o: (position.get(o, len(position)), o)):
            by_line.setdefault(self.lines.get(name), []).append(name)
        return "; ".join(self._describe_line(line, names) for line, names in by_line.items())

    def _describe_line(self, line: int | None, names: list[str]) -> str:
        if line is None:
            return ", ".join(names)
        text = self.code_lines[line - 1].strip() if line <= len(self.code_lines) else ""
        where = f"line {line}: {text}" if text else f"line {line}"
        return f"{', '.join(names)} ({where})"

    def origin_lines(self, origins: Any) -> list[int]:
        return sorted({ln for o in origins if (ln := self.lines.get(o)) is not None})

    def origin_modules(self, origins: Any) -> tuple[str | None, list[str]]:
        return origin_modules(origins, self.modules)


def graph_device(example_inputs: Sequence[Any], gm: torch.fx.GraphModule | None = None) -> str:
    """Where a graph's tensors live: CUDA if any input is on CUDA (CPU scalars mixed with
    CUDA tensors run on the GPU, as in eager), else the device of the tensors the graph
    makes when it has no tensor inputs (`torch.arange(n, device="cuda")`), else the CPU."""
    devices = {device_type(t) for t in example_inputs if isinstance(t, torch.Tensor)
               and not t.is_meta}
    if not devices and gm is not None:
        for node in gm.graph.nodes:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                devices.add(device_type(val))
    return combined(devices)
