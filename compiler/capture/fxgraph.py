"""FX graph to JSON, with each node's user source line recovered from its stack trace and
its module (compiler/capture/modules.py)."""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.capture.modules import graph_modules, node_module
from kernelscope.compiler.ir.handlers import dtype_name
from kernelscope.compiler.ir.opnames import op_name

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def source_line(node: torch.fx.Node, filename: str | None) -> int | None:
    """The innermost frame of the user's file in the node's stack trace."""
    trace = node.meta.get("stack_trace") or ""
    line = None
    for m in _FRAME.finditer(trace):
        path = m.group("file")
        if filename is not None:
            if path == filename:
                line = int(m.group("line"))
        elif "/torch/" not in path and "/compiler/" not in path:
            line = int(m.group("line"))
    return line


def node_lines(gm: torch.fx.GraphModule, filename: str | None) -> dict[str, int | None]:
    return {n.name: source_line(n, filename) for n in gm.graph.nodes}


def _dims(sizes: Any) -> list[int | str]:
    # A symbolic size (a dynamic-shape graph as Dynamo captured it) reads as its expression.
    return [s if isinstance(s, int) else str(s) for s in sizes]


def _meta(node: torch.fx.Node) -> dict[str, Any]:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return {"shape": _dims(val.shape), "stride": _dims(val.stride()),
                "dtype": dtype_name(val.dtype)}
    if isinstance(val, (list, tuple)):
        parts = [v for v in val if isinstance(v, torch.Tensor)]
        return {"shape": [_dims(v.shape) for v in parts],
                "dtype": [dtype_name(v.dtype) for v in parts], "stride": None}
    return {"shape": None, "stride": None, "dtype": None}


def arg_text(a: Any) -> str:
    """An argument as the events show it: an FX node or a tensor argument (an extern
    call's TensorArg) by its name, a list item by item, anything else as repr."""
    if isinstance(a, torch.fx.Node) or getattr(a, "name", None) is not None and \
            hasattr(a, "size"):
        return str(a.name)
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(arg_text(x) for x in a) + "]"
    return repr(a)


def graph_json(gm: torch.fx.GraphModule, gid: int, lines: dict[str, int | None],
               code_lines: list[str]) -> dict[str, Any]:
    nodes, edges = [], []
    for n in gm.graph.nodes:
        line = lines.get(n.name)
        nodes.append({
            "name": n.name,
            "op": n.op,
            "target": op_name(n.target),
            "args": [arg_text(a) for a in n.args],
            "line": line,
            "source": code_lines[line - 1].strip() if line and line <= len(code_lines) else None,
            **_meta(n),
            "module": node_module(n.meta),
        })
        for inp in n.all_input_nodes:
            edges.append([inp.name, n.name])
    modules = [{"path": p, "type": c} for p, c in graph_modules(n.meta for n in gm.graph.nodes)]
    return {"id": gid, "name": f"graph{gid}", "code": gm.code.strip(), "nodes": nodes,
            "edges": edges, "modules": modules}
