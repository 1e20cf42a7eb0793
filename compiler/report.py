"""Human-readable rendering of StageEvents for the terminal (`kernelscope compile`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _rule(title: str) -> str:
    return f"\n== {title} " + "=" * max(0, 76 - len(title))


def _graphs(data: dict[str, Any]) -> list[dict[str, Any]]:
    return data.get("graphs", [])


def _per_graph(render: Callable[[dict[str, Any]], list[str]]
               ) -> Callable[[dict[str, Any]], list[str]]:
    """A stage's renderer from its one-graph renderer: the graphs' lines in order."""
    return lambda d: [line for g in _graphs(d) for line in render(g)]


def _source(d: dict[str, Any]) -> list[str]:
    ins = ", ".join(f"{i['name']}: {i.get('dtype', '')}{i.get('shape', '')}"
                    for i in d["inputs"])
    v = d["versions"]
    return [f"entry {d['entry']}({ins}) on {d['device']}, backend {d['backend']}"
            + (" (Triton interpreter)" if d.get("triton_interpret") else ""),
            f"torch {v['torch']}, triton {v['triton']}, gpu {v['gpu']}"]


def _capture_graph(g: dict[str, Any]) -> list[str]:
    out: list[str] = []
    out.append(f"-- {g['name']} ({len(g['nodes'])} nodes)")
    for n in g["nodes"]:
        if n["op"] == "call_function":
            where = f"  # line {n['line']}" if n["line"] else ""
            out.append(f"  {n['name']} = {n['target']}({', '.join(n['args'])})"
                       f" -> {n['dtype']}{n['shape']}{where}")
    return out


def _capture(d: dict[str, Any]) -> list[str]:
    out = _per_graph(_capture_graph)(d)
    for b in d.get("graph_breaks", []):
        out.append(f"graph break at line {b['line']}: {b['reason']}")
    return out


def _lowering_graph(g: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for b in g["buffers"]:
        out.append(f"-- {b['name']} {b['kind']} {b['dtype']}{b['size']} "
                   f"from {', '.join(b['origins'])}  [{b.get('realized', '')}]")
        if b.get("text"):
            out += ["   " + line for line in b["text"].splitlines()]
        if b.get("extern"):
            out.append(f"   {b['extern']['op']}({', '.join(b['extern']['args'])})")
    for f in g["fallbacks"]:
        out.append(f"fallback: {f['op']} (node {f['node']}, line {f['line']}): "
                   f"{f['reason']}")
    out += [f"note: {n}" for n in g.get("notes", [])]
    return out


_lowering = _per_graph(_lowering_graph)


def _scheduling_graph(g: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for k in g["kernels"]:
        out.append(f"kernel {k['name']}: {', '.join(k['buffers'])}  "
                   f"({k['numel']} x {k['rnumel']})")
    for dec in g["decisions"]:
        mark = "fused  " if dec["fused"] else "refused"
        out.append(f"  {mark} {dec['node1']} + {dec['node2']} ({dec['kind']}, "
                   f"{dec['score']} B): {dec['reason']}")
    if g["removed_buffers"]:
        out.append(f"kept in registers: {', '.join(g['removed_buffers'])}")
    return out


_scheduling = _per_graph(_scheduling_graph)


def _memory_graph(g: dict[str, Any]) -> list[str]:
    out: list[str] = []
    out.append(f"{'buffer':10s} {'bytes':>12s} {'first':>5s} {'last':>5s}  reuses")
    for b in g["buffers"]:
        out.append(f"{b['name']:10s} {b['bytes']:12d} {b['first']:5d} {b['last']:5d}  "
                   f"{b['reused_from'] or ''}{' (output)' if b['output'] else ''}")
    out.append(f"peak {g['peak_bytes']} B with reuse, {g['peak_bytes_no_reuse']} B without")
    return out


_memory = _per_graph(_memory_graph)


def _codegen_graph(g: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for k in g["kernels"]:
        out.append(f"-- {k['name']} ({k['language']})")
        out.append(k["source"].rstrip())
    out.append("-- wrapper")
    out.append(g["wrapper"]["source"].split("def call", 1)[-1].join(["def call", ""])
               .rstrip())
    return out


_codegen = _per_graph(_codegen_graph)


def _compile_graph(g: dict[str, Any]) -> list[str]:
    out: list[str] = []
    cache = "hit" if g["cache_hit"] else "miss"
    out.append(f"graph {g['id']}: {g['ms']:.1f} ms, cache {cache}")
    for k in g["kernels"]:
        extra = "".join(f", {key} {k[key]}" for key in ("registers", "spills")
                        if k.get(key) is not None)
        out.append(f"  {k['name']}: first launch {k['ms']} ms{extra}")
    return out


_compile = _per_graph(_compile_graph)


def _run(d: dict[str, Any]) -> list[str]:
    out = [f"{'PASS' if d['ok'] else 'FAIL'} against {d.get('reference') or 'eager'}"]
    for o in d["outputs"]:
        tol = f" (atol {o['atol']:g}, rtol {o['rtol']:g})" if o.get("atol") is not None else ""
        err = f": {o['error']}" if o.get("error") else ""
        out.append(f"  graph {o.get('graph', 0)} output {o['index']} {o.get('dtype', '')}"
                   f"{tol}: max abs err {o.get('max_abs_err')}, "
                   f"max rel err {o.get('max_rel_err')}{err}")
    return out


def _profile(d: dict[str, Any]) -> list[str]:
    if not d.get("measured"):
        return [f"not measured: {d.get('reason')}"]
    out = [f"eager {d['eager_ms']} ms, kernelscope {d['kernelscope_ms']} ms, "
           f"inductor {d['inductor_ms']} ms on {d['device']}"]
    for k in d.get("kernels", []):
        bw = f", {k['gbps']} GB/s" if k.get("gbps") else ""
        out.append(f"  {k['name']}: {k['ms']} ms{bw}")
    return out


def _inductor(d: dict[str, Any]) -> list[str]:
    if d.get("error"):
        return [f"TorchInductor failed: {d['error']}"]
    total = (f"inductor {d['inductor_ms']} ms on {d['device']}"
             if d.get("measured") else f"not measured: {d.get('reason')}")
    return [total] + [f"  {k['name']} ({k['language']}): {k.get('ms')} ms"
                      for k in d.get("kernels", [])]


def _error(d: dict[str, Any]) -> list[str]:
    where = f" at line {d['line']}" if d.get("line") else ""
    return [f"{d['kind']} error in stage {d['stage']}{where}: {d['message']}"]


RENDER: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "source": _source, "capture": _capture, "lowering": _lowering,
    "scheduling": _scheduling, "memory": _memory, "codegen": _codegen,
    "compile": _compile, "run": _run, "profile": _profile, "error": _error,
    "capture_graph": _capture_graph, "inductor": _inductor,
    "done": lambda d: ["ok" if d.get("ok") else "failed"],
}


def render(event: dict[str, Any]) -> str:
    stage = event["stage"]
    lines = RENDER.get(stage, lambda d: [str(d)])(event["data"])
    return "\n".join([_rule(f"{stage} ({event['ms']:.1f} ms)")] + lines)
