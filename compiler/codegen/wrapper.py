"""The Python wrapper: allocate, launch, free, return, as the memory plan says. Each line
remembers which kernel it launches, for the `codegen` event's line map.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from kernelscope.compiler.codegen.backend import Backend, GeneratedKernel
from kernelscope.compiler.codegen.common import Lines
from kernelscope.compiler.ir import nodes
from kernelscope.compiler.ir.nodes import ExternKernel, ExternOutput, OpaqueArg, Stored, TensorArg
from kernelscope.compiler.ir.opnames import op_call
from kernelscope.compiler.schedule.memory import MemoryPlan
from kernelscope.compiler.schedule.scheduler import Schedule


def _pyval(v: Any) -> str:
    if isinstance(v, torch._ops.OpOverload):  # an op as an argument (with_effects)
        return op_call(v)
    if isinstance(v, OpaqueArg):
        return v.name
    if isinstance(v, TensorArg):
        if v.is_plain():
            return v.name
        return f"reinterpret({v.name}, {tuple(v.size)}, {tuple(v.stride)}, {v.offset})"
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, torch.device):
        return f"device({str(v)!r})"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_pyval(x) for x in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner}{',' if len(v) == 1 else ''})"
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return f"float({str(v)!r})"
    if isinstance(v, (torch.layout, torch.memory_format)):
        return str(v)
    return repr(v)


# One backend's share of a graph: its kernels and what its build made (None: nothing).
WrapperPart = tuple[Backend, list[GeneratedKernel], Path | None]


def generate_wrapper(inputs: Sequence[str], outputs: Sequence[Any], sched: Schedule,
                     memory: MemoryPlan, parts: Sequence[WrapperPart],
                     input_dtypes: Sequence[str] = ()) -> tuple[str, list[dict[str, Any]]]:
    """The wrapper of a graph whose kernels come from `parts` (one backend per device).
    The first line names the inputs' dtypes: the text is the cache key, and Triton
    specializes kernels on pointer dtypes their text may not name."""
    out = Lines()
    names = " + ".join(b.name for b, _, _ in parts)
    dtypes = f"; inputs {', '.join(input_dtypes)}" if input_dtypes else ""
    out.write(f"# Kernelscope wrapper ({names}): {len(sched.steps)} steps{dtypes}")
    out.write("import torch")
    out.write("from kernelscope.compiler.runtime.support import conform, cpp_kernel, device, "
              "empty_strided, ptr, reinterpret")
    own = _own_allocations(memory)
    for backend, kernels, artifact in parts:
        for line in backend.wrapper_prelude(kernels, artifact):
            out.write(line)
        aligned = {k.name: tuple(i for i, a in enumerate(k.args) if a in own) for k in kernels}
        for line in backend.launch_facts(aligned) if kernels else []:
            out.write(line)
    launches = {k.name: k.launch for _, kernels, _ in parts for k in kernels}
    out.write("")
    out.write("")
    out.write("def call(args):")
    with out.indent():
        if inputs:
            out.write(f"{', '.join(inputs)}, = args")
        out.write("args.clear()")
        for i, step in enumerate(sched.steps):
            _write_allocations(out, sched, memory, step.writes(), step.name)
            if step.plan is not None:
                out.write(launches[step.name], (), (step.name,))
            else:
                _write_extern(out, sched, step)
            for name in memory.frees.get(i, []):
                out.write(f"del {name}")
        out.write(f"return ({''.join(_output(o) + ', ' for o in outputs)})")
    source = out.text()
    line_map = [{"line": i + 1, "kernel": ln.buffers[0]}
                for i, ln in enumerate(out.lines) if ln.buffers]
    return source, line_map


def _own_allocations(memory: MemoryPlan) -> set[str]:
    """Buffers the wrapper allocates (or reuses at offset 0): aligned by the allocator."""
    mine = {p.name for p in memory.buffers if p.allocated_by == "wrapper" and not p.reused_from}
    return {p.name for p in memory.buffers if p.allocated_by == "wrapper" and p.storage in mine}


def _write_allocations(out: Lines, sched: Schedule, memory: MemoryPlan, writes: list[str],
                       step: str) -> None:
    for name in writes:
        plan = memory.plan_of(name)
        if plan is not None and plan.allocated_by == "input":
            out.write(f"{name} = {plan.storage}  # written in place (a mutated input)")
            continue
        if plan is None or plan.allocated_by != "wrapper":
            continue
        lay = sched.buffers[name].layout
        if plan.reused_from:
            out.write(f"{name} = reinterpret({plan.reused_from}, {tuple(lay.size)}, "
                      f"{tuple(lay.stride)}); del {plan.reused_from}  # reuse")
        else:
            out.write(f"{name} = empty_strided({tuple(lay.size)}, {tuple(lay.stride)}, "
                      f"device={lay.device!r}, dtype={lay.dtype})")


# ATen ops whose real output strides can differ from their meta function's (convolution
# follows its input's layout): the wrapper passes them through `conform`.
aten = torch.ops.aten
LAYOUT_AT_RUNTIME = nodes.ATTENTION_OPS | {aten.convolution, aten._convolution,
                                           aten.convolution_backward}


def _conformed(ext: ExternKernel, text: str, buf: Any) -> str:
    if getattr(ext.op, "overloadpacket", ext.op) not in LAYOUT_AT_RUNTIME or \
            not isinstance(buf.layout.size, tuple) or len(buf.layout.size) < 2:
        return text
    return f"conform({text}, {tuple(buf.layout.size)}, {tuple(buf.layout.stride)})"


def _write_extern(out: Lines, sched: Schedule, step: Any) -> None:
    ext: ExternKernel = step.extern
    args = ", ".join(_pyval(a) for a in ext.args)
    kwargs = "".join(f", {k}={_pyval(v)}" for k, v in ext.kwargs.items())
    if ext.kwargs and not args:
        kwargs = kwargs[2:]
    call = f"{op_call(ext.op)}({args}{kwargs})"
    out.write(f"{ext.name} = {call if ext.outputs else _conformed(ext, call, ext)}", (),
              (step.name,))
    for child in ext.outputs:
        buf = sched.buffers[child]
        assert isinstance(buf, ExternOutput)
        out.write(f"{child} = {_conformed(ext, f'{ext.name}[{buf.item}]', buf)}")


def _output(o: Any) -> str:
    return _pyval(o.as_arg() if isinstance(o, Stored) else o)
