"""A logged graph rebuilt as a snippet Kernelscope compiles: the one-click recompile of a
TORCH_TRACE log's static graph.

In: one graph of a log's `capture` event (compiler/trace/torch_trace_events.py): the AOT
graph text as torch printed it (`name: "f32[4, 8][8, 1]cpu" = torch.ops.aten.mm.default(...)`,
one node a line) and its nodes. Out: whether Kernelscope can rebuild it (`why_not`: None, or
the reason), and the snippet (`snippet`): the graph's own code as a module's `forward`, inputs
of the logged shapes, strides and dtypes, and a `torch.compile` call; the snippet runs as any
pasted snippet does (a sandboxed job), never here. `logged_names` maps a node of the compiled
snippet back to the logged node on its line, so Inductor's logged kernels for the graph can be
matched with ours by FX node (compiler/compare/traces.py, `logged_inductor`).

A graph is rebuildable when every input has a static shape and a known dtype, and every call
is an ATen or prims op that is neither random (its values would differ from the log's run)
nor one that holds state or a subgraph (higher-order ops, custom ops), nor one ATen runs on
CUDA only (a CUDA run's attention kernels; the snippet runs on the CPU where the server has
no GPU). Torch-free, string
work only: the web tier makes the snippet from a stored trace.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from kernelscope.compiler.compare.match import match
from kernelscope.compiler.compare.traces import inductor, ours, stage_data
from kernelscope.compiler.devices import CPU, CUDA

HEADER = "# Rebuilt by Kernelscope from the TORCH_TRACE log of trace {trace}, graph {graph}"
_HEADER = re.compile(r"^# Rebuilt by Kernelscope from the TORCH_TRACE log of trace "
                     r"([\w-]+), graph (\d+)$", re.M)
# A node's line: `name: "f32[4][1]cpu" = torch.ops...(`; one of several outputs (a tuple) is
# printed without its type: `var_mean = torch.ops.aten.var_mean.correction(`.
_CALL = re.compile(r'^\s+(\w+)(?:: "[^"]*")? = (?:torch\.ops\.)?([\w.]+)\(')
_ASSIGN = re.compile(r'^\s+(\w+)(?:: "[^"]*")? = (?!None\b)')
_NAMESPACES = ("aten.", "prims.")
_RANDOM = re.compile(r"\b(rand\w*|bernoulli|native_dropout|normal|uniform|exponential|"
                     r"inductor_random|inductor_seeds?|inductor_lookup_seed|multinomial|"
                     r"poisson|geometric|cauchy|log_normal|random_)\b")
# ATen ops with no CPU kernel (the memory-efficient, flash and cuDNN attention of a CUDA run)
_CUDA_ONLY = re.compile(
    r"\b_?(scaled_dot_product_)?(efficient|flash|cudnn)_attention(?!\w*for_cpu)")
_SIGNATURE = re.compile(r"def forward\((.*?)\):\s*$", re.S | re.M)
_DEVICE = re.compile(r"device\(type='(\w+)'(?:, index=\d+)?\)")
_DEVICE_LINE = {
    CPU: f'DEVICE = "{CPU}"',
    CUDA: f'DEVICE = "{CUDA}" if torch.cuda.is_available() else "{CPU}"  # logged on CUDA'}
_INPUT = """def _input(size, stride, dtype):
    # values on a storage of the logged size, viewed with the logged strides
    n = 1 + sum((d - 1) * s for d, s in zip(size, stride)) if all(size) else 0
    if dtype.is_floating_point or dtype.is_complex:
        flat = torch.randn(n, dtype=dtype)
    elif dtype == torch.bool:
        flat = torch.rand(n) < 0.5
    else:
        flat = torch.randint(0, 2, (n,), dtype=dtype)
    return flat.to(DEVICE).as_strided(size, stride)
"""
MAX_NODES = 20000  # a graph larger than this is not offered (the snippet would be megabytes)


def why_not(graph: dict[str, Any]) -> str | None:
    """None when the graph can be rebuilt; else why not, in words the page shows."""
    code = str(graph.get("code") or "")
    nodes = graph.get("nodes") or []
    if not code or "def forward(" not in code:
        return "the log holds no readable graph code for it"
    if len(nodes) > MAX_NODES:
        return f"{len(nodes)} nodes, more than the {MAX_NODES} a rebuild takes"
    for n in nodes:
        if n.get("op") != "placeholder":
            continue
        if n.get("dtype") is None:
            return f"input {n.get('name')} has no tensor type Kernelscope knows"
        dims = [*(n.get("shape") or []), *(n.get("stride") or [])]
        if n.get("shape") is None or any(not isinstance(d, int) for d in dims):
            return f"input {n.get('name')} has a dynamic shape ({_shape(n)})"
    signature = _SIGNATURE.search(code)
    body = [ln for ln in code[signature.end():].splitlines() if not ln.lstrip().startswith("#")] \
        if signature else []
    if signature is None or any(re.search(r"\bself\.", ln) for ln in body):
        return "it calls a submodule or a higher-order op (a subgraph)"
    for line in code.splitlines():
        m = _CALL.match(line)
        if m is None:
            continue
        target = m.group(2)
        if target.startswith("higher_order."):
            return f"it calls the higher-order op {target}"
        if not target.startswith(_NAMESPACES) and not target.startswith("operator."):
            return f"it calls {target}, not an ATen op"
        if _RANDOM.search(target.split(".")[1] if "." in target else target):
            return f"it calls the random op {target} (its values would differ from the run's)"
        if _CUDA_ONLY.search(target):
            return (f"it calls {target}, which ATen runs on CUDA only (a rebuild falls back to "
                    "the CPU where the server has no GPU)")
    return None


def _shape(node: dict[str, Any]) -> str:
    return f"[{', '.join(str(d) for d in node.get('shape') or [])}]"


def snippet(graph: dict[str, Any], trace_id: str) -> str:
    """The graph's code as a snippet: a module whose `forward` is the logged code, inputs of
    the logged shapes, strides and dtypes (seeded), compiled and called once."""
    code = str(graph["code"])
    body = code[code.index("def forward("):].rstrip()
    inputs = [n for n in graph.get("nodes") or [] if n.get("op") == "placeholder"]
    signature = _SIGNATURE.search(code)
    device = CUDA if signature and re.search(rf'\]{CUDA}(:\d+)?"', signature.group(1)) \
        else CPU
    made = ",\n    ".join(f"_input({tuple(n['shape'])!r}, {tuple(n['stride'] or ())!r}, "
                          f"{n['dtype']})" for n in inputs)
    forward = _DEVICE.sub("device(DEVICE)", body)
    return (
        f"{HEADER.format(trace=trace_id, graph=graph['id'])}\n"
        f"# ({graph.get('name', '')}): the logged graph's code, run on inputs of its logged\n"
        "# shapes, strides and dtypes. Each line is one node of the log, under its own name.\n"
        "from math import inf, nan  # noqa: F401  (the printed graph may use them)\n\n"
        "import torch\n"
        "from torch import device  # noqa: F401\n\n"
        f"{_DEVICE_LINE[device]}\n\n\n"
        "class LoggedGraph(torch.nn.Module):\n"
        f"    {forward}\n\n\n"
        f"{_INPUT}\n\n"
        "torch.manual_seed(0)\n"
        f"inputs = [\n    {made},\n]\n"
        "graph = torch.compile(LoggedGraph())\n"
        "out = graph(*inputs)\n")


def rebuilt_from(code: str) -> tuple[str, int] | None:
    """(the log's trace id, its graph id) a rebuilt snippet names in its first line."""
    m = _HEADER.search(code.split("\n", 1)[0])
    return (m.group(1), int(m.group(2))) if m else None


def logged_names(code: str) -> dict[int, str]:
    """The snippet's line -> the logged node defined on it (each line of the logged graph's
    forward is one logged node)."""
    lines = code.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("class LoggedGraph")), 0)
    end = next((i for i, ln in enumerate(lines) if ln.startswith("def _input")), len(lines))
    return {i + 1: m.group(1) for i in range(start, end)
            if (m := _ASSIGN.match(lines[i])) is not None}


def against_log(events: Sequence[dict[str, Any]], log_events: Sequence[dict[str, Any]],
                log_id: str) -> dict[str, Any]:
    """A rebuilt graph's trace (our kernels) against Inductor's kernels for the same graph as
    the log holds them, matched by FX node (compiler/compare/match.py): Inductor's kernels
    for the logged graph, their nodes renamed to ours through the snippet's lines, as the
    trace's own `inductor` event would carry them, and the groups. ValueError: the trace is
    no rebuild of a graph of that log."""
    code = str(stage_data(events, "source").get("code") or "")
    named = rebuilt_from(code)
    if named is None or named[0] != log_id:
        raise ValueError(f"this trace is no rebuild of a graph of trace {log_id!r}")
    logged = stage_data(log_events, "capture").get("graphs") or []
    graph = next((g for g in logged if g.get("id") == named[1]), None)
    mine = (stage_data(events, "capture").get("graphs") or [None])[0]
    if graph is None or mine is None:
        raise ValueError(f"trace {log_id!r} has no graph {named[1]}, or this trace no graph")
    names = logged_names(code)
    ours_of: dict[str, list[str]] = {}
    for n in mine.get("nodes") or []:
        if n.get("line") in names:
            ours_of.setdefault(names[n["line"]], []).append(str(n["name"]))
    generated: dict[str, Any] = next(
        (g for g in stage_data(log_events, "codegen").get("graphs") or []
         if g.get("id") == named[1]), {})
    sources = {k.get("name"): k.get("source", "") for k in generated.get("kernels") or []}
    kernels = [{**k, "graph": mine["id"],
                "source": k.get("source") or sources.get(k.get("name"), ""),
                "nodes": [o for name in k.get("nodes") or [] for o in ours_of.get(name, [])]}
               for k in stage_data(log_events, "inductor").get("kernels") or []
               if isinstance(k, dict) and k.get("graph") == named[1]]
    wrapper = (generated.get("wrapper") or {}).get("source", "")
    event = {"measured": False, "code": [wrapper] if wrapper else [], "kernels": kernels,
             "reason": f"Inductor's kernels for {graph.get('name', '')} as the log of trace "
                       f"{log_id} holds them (untimed)"}
    groups = match(ours(events), inductor([{"stage": "inductor", "data": event}]))
    return {"groups": [asdict(g) for g in groups], "inductor": event, "graph": named[1],
            "name": graph.get("name", "")}


def is_log_trace(events: Sequence[dict[str, Any]]) -> bool:
    """A trace opened from a TORCH_TRACE log (its capture says where it came from)."""
    return bool(stage_data(events, "capture").get("log"))


def logged_graph(events: Sequence[dict[str, Any]], graph: int) -> dict[str, Any] | None:
    """Graph `graph` of a log's trace, or None (not a log's trace, or no such graph)."""
    if not is_log_trace(events):
        return None
    return next((g for g in stage_data(events, "capture").get("graphs") or []
                 if isinstance(g, dict) and g.get("id") == graph), None)
