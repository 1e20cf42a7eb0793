"""A checker for the event stream contract in docs/events.md (schema 1)."""

from __future__ import annotations

from typing import Any

from compiler.events import SCHEMA_VERSION, STAGES

REQUIRED: dict[str, dict[str, type | tuple[type, ...]]] = {
    "source": {"code": str, "filename": str, "entry": str, "inputs": list, "device": str,
               "backend": str, "options": dict, "versions": dict},
    "capture": {"graphs": list, "graph_breaks": list, "dynamo_graphs": int},
    "lowering": {"graphs": list},
    "scheduling": {"graphs": list},
    "memory": {"graphs": list},
    "codegen": {"graphs": list},
    "compile": {"graphs": list},
    "run": {"ok": bool, "outputs": list, "atol": float, "rtol": float},
    "profile": {"measured": bool},
    "error": {"stage": str, "kind": str, "message": str},
    "done": {"ok": bool},
}
PER_GRAPH: dict[str, dict[str, type | tuple[type, ...]]] = {
    "capture": {"id": int, "name": str, "code": str, "nodes": list, "edges": list},
    "lowering": {"id": int, "buffers": list, "inputs": list, "outputs": list, "fallbacks": list},
    "scheduling": {"id": int, "kernels": list, "decisions": list, "removed_buffers": list},
    "memory": {"id": int, "steps": list, "buffers": list, "peak_bytes": int,
               "peak_bytes_no_reuse": int},
    "codegen": {"id": int, "backend": str, "kernels": list, "wrapper": dict},
    "compile": {"id": int, "ms": float, "cache_hit": bool, "kernels": list},
}
ITEMS: dict[tuple[str, str], dict[str, type | tuple[type, ...]]] = {
    ("capture", "nodes"): {"name": str, "op": str, "target": str, "args": list,
                           "line": (int, type(None))},
    ("lowering", "buffers"): {"name": str, "kind": str, "size": list, "stride": list,
                              "dtype": str, "origins": list, "lines": list},
    ("scheduling", "kernels"): {"name": str, "kind": str, "buffers": list, "numel": int,
                                "rnumel": int, "origins": list, "lines": list},
    ("scheduling", "decisions"): {"node1": str, "node2": str, "fused": bool, "kind": str,
                                  "reason": str, "score": int},
    ("memory", "buffers"): {"name": str, "bytes": int, "first": int, "last": int,
                            "reused_from": (str, type(None)), "output": bool},
    ("codegen", "kernels"): {"name": str, "language": str, "source": str, "line_map": list},
}


def _check(obj: dict[str, Any], spec: dict[str, Any], where: str) -> None:
    for key, typ in spec.items():
        assert key in obj, f"{where}: missing {key!r}"
        assert isinstance(obj[key], typ), f"{where}.{key}: {type(obj[key]).__name__}"


def check_event(e: dict[str, Any]) -> None:
    assert e["schema"] == SCHEMA_VERSION
    assert isinstance(e["seq"], int) and isinstance(e["ms"], (int, float))
    stage, data = e["stage"], e["data"]
    assert stage in REQUIRED, stage
    _check(data, REQUIRED[stage], stage)
    for g in data.get("graphs", []) if stage in PER_GRAPH else []:
        _check(g, PER_GRAPH[stage], f"{stage}.graphs[{g.get('id')}]")
        for (s, field), spec in ITEMS.items():
            if s == stage:
                for i, item in enumerate(g[field]):
                    _check(item, spec, f"{stage}.{field}[{i}]")
    if stage == "codegen":
        for g in data["graphs"]:
            for k in g["kernels"]:
                n = len(k["source"].splitlines())
                assert all(1 <= m["line"] <= n for m in k["line_map"])
    if stage == "memory":
        for g in data["graphs"]:
            for b in g["buffers"]:
                assert 0 <= b["first"] <= b["last"] < max(len(g["steps"]), 1)


def check_stream(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(len(events)))
    stages = [e["stage"] for e in events]
    assert stages[-1] == "done"
    order = [s for s in stages if s in STAGES]
    assert order == list(STAGES[:len(order)]), stages
    if "error" in stages:
        assert stages.index("error") == len(stages) - 2
    for e in events:
        check_event(e)
