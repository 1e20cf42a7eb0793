"""The `profile` event's rows as data: which row each wrapper step is, who runs an extern
call, the rollups by module and by graph, and ours against eager by FX node.

In: a graph's schedule (its steps, their FX nodes and modules) and the samples measured
for each (graph, step). Out: `ProfileRow`s, `Rollup`s and `OpComparison`s (events/results.py).
Pure functions over data: compiler/profiling.py measures, this module names and adds up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelscope.compiler.compare.match import node_groups
from kernelscope.compiler.devices import is_gpu
from kernelscope.compiler.events import types as ev
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.ir.nodes import TensorArg
from kernelscope.compiler.runtime.rows import WRAPPER
from kernelscope.compiler.runtime.stats import spread

NO_MODULE = "(top level)"
# Who runs an ATen op that a compiled graph calls (by the op's name), per device: the
# library its CPU and CUDA kernels dispatch to in a stock PyTorch build.
_GEMM = ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear")
_CONV = ("convolution", "_convolution", "convolution_backward", "cudnn_convolution")


def library(op: str, device: str) -> str:
    """The library behind an extern op on `device`: "cuBLAS" or "MKL" for matrix products,
    "cuDNN" or "oneDNN" for convolutions, attention's own kernels, else "ATen"."""
    base = op.removeprefix("aten.").removeprefix("aten::").split(".")[0]
    gpu = is_gpu(device)
    if base in _GEMM:
        return "cuBLAS" if gpu else _cpu_blas()
    if base in _CONV:
        return "cuDNN" if gpu else "oneDNN"
    if "scaled_dot_product" in base:
        kind = "cudnn" if "cudnn" in base else "flash" if "flash" in base else \
            "efficient" if "efficient" in base else "math"
        return {"cudnn": "cuDNN attention", "flash": "FlashAttention (ATen)",
                "efficient": "mem-efficient attention (ATen)"}.get(kind, "ATen")
    return "ATen"


def _cpu_blas() -> str:
    import torch

    return "MKL" if torch.backends.mkl.is_available() else "ATen BLAS"


def tensor_shapes(args: Sequence[Any]) -> list[list[int]]:
    """The shapes of an extern call's tensor arguments (nested lists of them too)."""
    out: list[list[int]] = []
    for a in args:
        if isinstance(a, TensorArg):
            out.append([int(s) if str(s).lstrip("-").isdigit() else -1 for s in a.size])
        elif isinstance(a, (list, tuple)):
            out += tensor_shapes(a)
    return out


def node_shapes(node: Any) -> list[list[int]]:
    """The shapes of an FX node's tensor arguments (their example values' shapes)."""
    out = []
    for a in node.all_input_nodes:
        val = a.meta.get("val")
        shape = getattr(val, "shape", None)
        if shape is not None:
            out.append([int(s) if str(s).isdigit() else -1 for s in shape])
    return out


def step_rows(w: GraphWork, samples: Mapping[tuple[int, str], list[float]], cuda: bool
              ) -> list[ev.ProfileRow]:
    """One row per step of graph `w` that has samples (kernels and extern calls, in
    program order), then its wrapper's row."""
    rows = []
    for step in w.sched.steps if w.sched else []:
        values = samples.get((w.gid, step.name))
        if values is None:
            continue
        origins = sorted({o for n in step.group.nodes for o in n.buffer.origins})
        module, _ = w.origin_modules(origins)
        row = ev.ProfileRow(step.name, "kernel", ev.Spread(**spread(values)), w.gid, w.kind,
                            module=module, origins=origins)
        if step.plan is not None:
            backend = w.backends.get(step.plan.device) or w.backend
            row.library = f"generated ({backend.label if backend else '?'})"
        elif step.extern is not None:
            ext = step.extern
            row.kind, row.op = "extern", str(ext.op)
            row.shapes = tensor_shapes([*ext.args, *ext.kwargs.values()])
            row.library = library(row.op, w.options.device)
        rows.append(row)
    wrapper = samples.get((w.gid, WRAPPER))
    if wrapper is not None:
        what = "device idle in the call" if cuda else "wrapper host time"
        rows.append(ev.ProfileRow(f"{what} (graph {w.gid})", "wrapper",
                                  ev.Spread(**spread(wrapper)), w.gid, w.kind,
                                  library="Python"))
    return rows


def _add(into: dict[str, list[float]], key: str, ms: float) -> None:
    acc = into.setdefault(key, [0.0, 0.0])
    acc[0] += ms
    acc[1] += 1


def rollups(rows: Sequence[ev.ProfileRow], total: float, kinds: Mapping[int, str | None]
            ) -> list[ev.Rollup]:
    """The covered rows added up by module path (every ancestor of a row's module gets
    its time too: "blocks.3" holds "blocks.3.attn"), by graph, and by graph kind."""
    by: dict[str, dict[str, list[float]]] = {"module": {}, "graph": {}, "graph_kind": {}}
    for r in rows:
        if not r.covered:
            continue
        ms = r.time.ms or 0.0
        path = r.module or ""
        parts = path.split(".") if path else []
        for i in range(len(parts)):
            _add(by["module"], ".".join(parts[:i + 1]), ms)
        if not parts:
            _add(by["module"], NO_MODULE if r.kind not in ("wrapper", "host") else
                 "(wrapper / Python)", ms)
        kind = kinds.get(r.graph)
        _add(by["graph"], f"graph {r.graph}" + (f" ({kind})" if kind else ""), ms)
        _add(by["graph_kind"], kind or "inference", ms)
    out = [ev.Rollup(key, how, round(ms, 4),  # type: ignore[arg-type]
                     round(100 * ms / total, 1) if total else None, int(n))
           for how, groups in by.items() for key, (ms, n) in groups.items()]
    return sorted(out, key=lambda r: (r.by, -r.ms))


def compare_rows(ours: Sequence[ev.ProfileRow], eager: Sequence[ev.ProfileRow]
                 ) -> list[ev.OpComparison]:
    """Ours against eager by FX node: rows of either side that share an FX node (in one
    graph) form a group, so a fused kernel faces the eager ops it replaced. Each side's
    time is its rows' sum (None: no row of that side). Slowest first."""
    items = [(r, "ours") for r in ours if r.origins] + [(r, "eager") for r in eager if r.origins]
    groups = [[items[i] for i in idx] for idx in node_groups([(r.graph, r.origins)
                                                                for r, _ in items])]
    return sorted((_comparison(g) for g in groups),
                  key=lambda c: -max(c.ours_ms or 0.0, c.eager_ms or 0.0))


def _comparison(group: list[tuple[ev.ProfileRow, str]]) -> ev.OpComparison:
    def side(name: str) -> list[ev.ProfileRow]:
        return [r for r, s in group if s == name]

    def total(rows: list[ev.ProfileRow]) -> float | None:
        return round(sum(r.time.ms or 0.0 for r in rows), 4) if rows else None

    ours, eager = side("ours"), side("eager")
    nodes = sorted({n for r, _ in group for n in r.origins})
    module = next((r.module for r in ours + eager if r.module), None)
    return ev.OpComparison(nodes, [r.name for r in ours], [r.name for r in eager],
                           total(ours), total(eager), module, group[0][0].graph)
