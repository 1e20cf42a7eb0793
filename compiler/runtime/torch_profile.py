"""What torch.profiler says about a call: eager's time per ATen op, the device's time per
step of our wrapper (CUPTI, on a GPU), and the allocator's high-water mark of one call.

In: a zero-argument call (eager: the FX graph module on its inputs), how many calls.
Out: samples per row (one per call, ms) keyed by the FX node an op came from, and for a
peak the bytes. The profiler's own cost per op lands in the op rows it wraps, so eager's
rows are compared with its call timed without the profiler (compiler/profiling.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from kernelscope.compiler.devices import CPU, CUDA

CALL = "kernelscope_call"
STEP = "ks:"  # the prefix of a wrapper step's range (the GPU's timed wrapper)
HOST = "host"  # eager: the graph module's Python between ops


@dataclass
class OpRows:
    """Per row key (an FX node's name, HOST, or "?aten::x" for an op no node matched) the
    samples, and what each op was (name, shapes)."""

    samples: dict[str, list[float]] = field(default_factory=dict)
    ops: dict[str, tuple[str, list[list[int]]]] = field(default_factory=dict)
    timeline: list[dict[str, Any]] = field(default_factory=list)


def _calls(fn: Callable[[], Any], n: int, cuda: bool, **kw: Any) -> Any:
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    with profile(activities=activities, **kw) as prof:
        for _ in range(n):
            with record_function(CALL):
                fn()
            if cuda:
                torch.cuda.synchronize()
    return prof


def _op_name(target: Any) -> str | None:
    schema = getattr(target, "_schema", None)
    return schema.name if schema is not None else None


def eager_op_rows(gm: torch.fx.GraphModule, call: Callable[[], Any], n: int, cuda: bool
                  ) -> OpRows:
    """Each FX node's op time per call over `n` profiled calls (CPU: the op's inclusive
    host time; GPU: its kernels' device time), and the Python between ops (HOST)."""
    nodes = [(node.name, name) for node in gm.graph.nodes if node.op == "call_function"
             and (name := _op_name(node.target)) is not None]
    prof = _calls(call, n, cuda, record_shapes=True)
    out = OpRows()
    calls = [e for e in prof.events() if e.name == CALL]
    for i, c in enumerate(calls):
        ops = sorted(c.cpu_children, key=lambda e: e.time_range.start)
        matched = _match(nodes, ops)
        for key, e in matched:
            ms = (e.device_time_total if cuda else e.cpu_time_total) / 1000
            out.samples.setdefault(key, []).append(ms)
            out.ops.setdefault(key, (e.name, [list(s) for s in e.input_shapes if s]))
        if not cuda:  # on a GPU the host's Python overlaps the device's work
            host = c.cpu_time_total - sum(e.cpu_time_total for e in ops)
            out.samples.setdefault(HOST, []).append(max(0.0, host) / 1000)
        if i == len(calls) // 2:
            out.timeline = [{"graph": 0, "name": key, "start_us": e.time_range.start
                             - c.time_range.start, "dur_us": e.cpu_time_total}
                            for key, e in matched]
    return out


def _match(nodes: list[tuple[str, str]], ops: list[Any]) -> list[tuple[str, Any]]:
    """Top-level op events to the FX nodes that made them, in program order: each node
    takes the next event of its op's name; events no node takes keep their op's name."""
    out: list[tuple[str, Any]] = []
    j = 0
    for node, name in nodes:
        k = next((k for k in range(j, len(ops)) if ops[k].name == name), None)
        if k is None:
            continue
        out += [(f"?{e.name}", e) for e in ops[j:k]]
        out.append((node, ops[k]))
        j = k + 1
    out += [(f"?{e.name}", e) for e in ops[j:]]
    return out


def step_device_rows(call: Callable[[], Any], n: int) -> tuple[dict[str, list[float]],
                                                                list[float]]:
    """GPU: per wrapper step (a `ks:<graph>:<step>` range around its launch in the timed
    wrapper) its kernels' device time per call (CUPTI), and per call the device's idle
    time inside the call's range (the host's wrapper and launches it waited on)."""
    prof = _calls(call, n, cuda=True)
    steps: dict[str, list[float]] = {}
    idle: list[float] = []
    for c in (e for e in prof.events() if e.name == CALL):
        busy = 0.0
        for e in c.cpu_children:
            if e.name.startswith(STEP):
                ms = e.device_time_total / 1000
                steps.setdefault(e.name.removeprefix(STEP), []).append(ms)
                busy += ms
        span = (c.time_range.end - c.time_range.start) / 1000
        idle.append(max(0.0, span - busy))
    return steps, idle


def peak_method(cuda: bool) -> str:
    """How `peak_bytes` measures, as the events say it."""
    return (("the CUDA caching allocator's high-water mark" if cuda else "torch.profiler's "
             "allocator records") + ": bytes in use at one call's peak above those at its start")


def peak_bytes(call: Callable[[], Any], cuda: bool) -> int | None:
    """Bytes in use at one call's peak above what was in use when it began. On a GPU the
    caching allocator keeps that peak itself (a profiler session costs 0.1-0.3 s there);
    on the CPU from the allocator records torch.profiler keeps with profile_memory."""
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        call()
        torch.cuda.synchronize()
        return max(0, torch.cuda.max_memory_allocated() - base)
    prof = _calls(call, 1, cuda, profile_memory=True)
    allocs = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack += node.children
        fields = node.extra_fields
        device = getattr(fields, "device", None)
        if type(fields).__name__ == "_ExtraFields_Allocation" and \
                getattr(device, "type", CUDA if cuda else CPU) == (CUDA if cuda else CPU):
            allocs.append((node.start_time_ns, fields.alloc_size, fields.total_allocated))
    if not allocs:
        return 0
    allocs.sort()
    base = allocs[0][2] - allocs[0][1]
    return max(0, max(total for _, _, total in allocs) - base)
