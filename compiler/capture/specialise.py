"""A dynamic-shape graph made static for the sizes of the call it was captured from.

Dynamo's recompile after a size change marks that dimension dynamic: the ATen graph then
takes its sizes as SymInt inputs (`arg0_1: Sym(s0)`) and computes shapes from them. The
back half lowers integer sizes only, so such a graph is specialised to the call the bundle
recorded: every integer input becomes a constant, every node that computes an integer
from them is folded, and the graph keeps its tensor inputs, node names and stack traces
(provenance still works). The graph's `lowering` event carries the note this returns.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch.utils._pytree import tree_map


def _replace(node: torch.fx.Node, value: Any) -> None:
    for user in list(node.users):
        user.args = tree_map(lambda a: value if a is node else a, user.args)
        user.kwargs = tree_map(lambda a: value if a is node else a, user.kwargs)


def specialise(gm: torch.fx.GraphModule, inputs: list[Any]
               ) -> tuple[torch.fx.GraphModule, list[Any], str | None]:
    """(graph, inputs, note): the graph unchanged (note None) when no input is an int."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sizes = {p: v for p, v in zip(placeholders, inputs)
             if isinstance(v, int) and not isinstance(v, bool)}
    if not sizes:
        return gm, inputs, None
    from kernelscope.compiler.capture.bundle import propagate

    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, Any] = {}
    kept = [v for p, v in zip(placeholders, inputs) if p not in sizes]
    for n in gm.graph.nodes:
        if n in sizes:
            env[n] = sizes[n]
            continue
        env[n] = graph.node_copy(n, lambda a: env[a])
    out = torch.fx.GraphModule(gm, graph)
    propagate(out, kept)
    # Fold every node that now computes a plain integer (sym_size, arithmetic on sizes).
    for n in list(out.graph.nodes):
        val = n.meta.get("val")
        if n.op == "call_function" and isinstance(val, (int, torch.SymInt)) \
                and not isinstance(val, bool):
            _replace(n, int(val))
            out.graph.erase_node(n)
    out.graph.lint()
    out.recompile()
    propagate(out, kept)
    named = ", ".join(f"{p.name}={v}" for p, v in sizes.items())
    return out, kept, f"dynamic shapes: specialised to the sizes of the captured call ({named})"
