"""Human-readable rendering of StageEvents for the terminal (`kernelscope compile`).

In: typed events (compiler/events/read.py). Each renderer takes its stage's dataclass of
compiler/events/types.py, so it reads fields the model declares and mypy checks them.
Out: the text `kernelscope compile FILE` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from kernelscope.compiler.events import types as ev
from kernelscope.compiler.events.read import Event

G = TypeVar("G")
G_co = TypeVar("G_co", covariant=True)


class _HasGraphs(Protocol[G_co]):
    @property
    def graphs(self) -> Sequence[G_co]: ...


def _rule(title: str) -> str:
    return f"\n== {title} " + "=" * max(0, 76 - len(title))


def _per_graph(render: Callable[[G], list[str]]) -> Callable[[_HasGraphs[G]], list[str]]:
    """A stage's renderer from its one-graph renderer: the graphs' lines in order."""
    return lambda d: [line for g in d.graphs for line in render(g)]


def _source(d: ev.Source) -> list[str]:
    ins = ", ".join(f"{i.name}: {i.dtype}{i.shape}" for i in d.inputs)
    v = d.versions
    return [f"entry {d.entry}({ins}) on {d.device}, backend {d.backend}"
            + (" (Triton interpreter)" if d.triton_interpret else ""),
            f"torch {v.torch}, triton {v.triton}, gpu {v.gpu}"]


def _capture_graph(g: ev.CaptureGraph) -> list[str]:
    out = [f"-- {g.name} ({len(g.nodes)} nodes)"]
    for n in g.nodes:
        if n.op == "call_function":
            where = f"  # line {n.line}" if n.line else ""
            out.append(f"  {n.name} = {n.target}({', '.join(map(str, n.args))})"
                       f" -> {n.dtype}{n.shape}{where}")
    return out


def _capture(d: ev.Capture, shown: frozenset[int] = frozenset()) -> list[str]:
    out = [line for g in d.graphs if g.id not in shown for line in _capture_graph(g)]
    above = [g.name for g in d.graphs if g.id in shown]
    if above:
        out.append(f"({', '.join(above)}: printed above, as captured)")
    for b in d.graph_breaks:
        out.append(f"graph break at line {b.line}: {b.reason}")
    return out


def _lowering_graph(g: ev.LoweringGraph) -> list[str]:
    out: list[str] = []
    for b in g.buffers:
        out.append(f"-- {b.name} {b.kind} {b.dtype}{b.size} "
                   f"from {', '.join(b.origins)}  [{b.realized}]")
        if b.text:
            out += ["   " + line for line in b.text.splitlines()]
        if b.extern:
            out.append(f"   {b.extern['op']}({', '.join(b.extern['args'])})")
    for f in g.fallbacks:
        out.append(f"fallback: {f.op} (node {f.node}, line {f.line}): {f.reason}")
    out += [f"note: {n}" for n in g.notes]
    return out


def _scheduling_graph(g: ev.SchedulingGraph) -> list[str]:
    out: list[str] = []
    for k in g.kernels:
        out.append(f"kernel {k.name}: {', '.join(k.buffers)}  ({k.numel} x {k.rnumel})")
    for dec in g.decisions:
        mark = "fused  " if dec.fused else "refused"
        out.append(f"  {mark} {dec.node1} + {dec.node2} ({dec.kind}, "
                   f"{dec.score} B): {dec.reason}")
    if g.removed_buffers:
        out.append(f"kept in registers: {', '.join(g.removed_buffers)}")
    return out


def _memory_graph(g: ev.MemoryGraph) -> list[str]:
    out = [f"{'buffer':10s} {'bytes':>12s} {'first':>5s} {'last':>5s}  reuses"]
    for b in g.buffers:
        out.append(f"{b.name:10s} {b.bytes:12d} {b.first:5d} {b.last:5d}  "
                   f"{b.reused_from or ''}{' (output)' if b.output else ''}")
    out.append(f"peak {g.peak_bytes} B with reuse, {g.peak_bytes_no_reuse} B without")
    return out


def _codegen_graph(g: ev.CodegenGraph) -> list[str]:
    out = [line for k in g.kernels for line in (f"-- {k.name} ({k.language})", k.source.rstrip())]
    return out + ["-- wrapper",
                  g.wrapper.source.split("def call", 1)[-1].join(["def call", ""]).rstrip()]


def _compile_graph(g: ev.CompileGraph) -> list[str]:
    out = [f"graph {g.id}: {g.ms:.1f} ms, cache {'hit' if g.cache_hit else 'miss'}"]
    for k in g.kernels:
        extra = "".join(f", {name} {n}" for name, n in
                        (("registers", k.registers), ("spills", k.spills)) if n is not None)
        out.append(f"  {k.name}: first launch {k.ms} ms{extra}")
    return out


def _run(d: ev.Run) -> list[str]:
    out = [f"{'PASS' if d.ok else 'FAIL'} against {d.reference or 'eager'}"]
    for o in d.outputs:
        tol = f" (atol {o.atol:g}, rtol {o.rtol:g})"
        err = f": {o.error}" if o.error else ""
        out.append(f"  graph {o.graph} output {o.index} {o.dtype}"
                   f"{tol}: max abs err {o.max_abs_err}, "
                   f"max rel err {o.max_rel_err}{err}")
    return out


def _profile(d: ev.Profile) -> list[str]:
    if not d.measured:
        return [f"not measured: {d.reason}"]
    out = [f"eager {d.eager_ms} ms, kernelscope {d.kernelscope_ms} ms, "
           f"inductor {d.inductor_ms} ms on {d.device}"]
    for k in d.kernels:
        bw = f", {k.gbps} GB/s" if k.gbps else ""
        out.append(f"  {k.name}: {k.ms} ms{bw}")
    return out


def _inductor(d: ev.Inductor) -> list[str]:
    if d.error:
        return [f"TorchInductor failed: {d.error}"]
    total = (f"inductor {d.inductor_ms} ms on {d.device}" if d.measured
             else f"not measured: {d.reason}")
    return [total] + [f"  {k.name} ({k.language}): {k.ms} ms" for k in d.kernels]


def _gpu_stages_graph(g: ev.CompileGraph) -> list[str]:
    out = [f"graph {g.id}: {g.ms:.1f} ms{', kept' if g.cache_hit else ''}"]
    for k in g.kernels:
        stages = ", ".join(sorted(k.ir or {})) or f"none: {k.stages_note}"
        out.append(f"  {k.name} for {k.gpu_target}: {stages}")
    return out


def _waiting(d: ev.Waiting) -> list[str]:
    return [d.message]


def _progress(d: ev.Progress) -> list[str]:
    return [f"  ... {d.message}"]


def _error(d: ev.Error) -> list[str]:
    where = f" at line {d.line}" if d.line else ""
    return [f"{d.kind} error in stage {d.stage}{where}: {d.message}"]


def _done(d: ev.Done) -> list[str]:
    return ["ok" if d.ok else "failed"]


# Keyed by the payload's class: a stage's renderer takes exactly that class.
RENDER: dict[type, Callable[[Any], list[str]]] = {
    ev.Source: _source, ev.Capture: _capture, ev.Lowering: _per_graph(_lowering_graph),
    ev.Scheduling: _per_graph(_scheduling_graph), ev.Memory: _per_graph(_memory_graph),
    ev.Codegen: _per_graph(_codegen_graph), ev.Compile: _per_graph(_compile_graph),
    ev.Run: _run, ev.Profile: _profile, ev.Error: _error, ev.JobDone: _done,
    ev.CaptureGraph: _capture_graph, ev.Inductor: _inductor, ev.Waiting: _waiting,
    ev.Progress: _progress,
    ev.GpuStages: _per_graph(_gpu_stages_graph),
}


def render(event: Event[Any], shown: frozenset[int] = frozenset()) -> str:
    """One event as text. `shown`: ids of graphs already printed as they were captured
    (`capture_graph`): the `capture` event names them instead of printing them again."""
    data = event.data
    lines = _capture(data, shown) if isinstance(data, ev.Capture) else RENDER[type(data)](data)
    return "\n".join([_rule(f"{event.stage} ({event.ms:.1f} ms)")] + lines)
