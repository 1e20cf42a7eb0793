"""Training graphs: how AOTAutograd's forward and backward graphs of one Dynamo graph
relate, for the back half's `memory` and `run` stages.

AOTAutograd's partition makes the forward graph return, after the user's outputs, the
values the backward needs ("saved for backward"); the backward graph takes those same
values (same node names) as its first inputs, then one tangent per output that needs a
gradient (`tangents_1`, ...). A forward and a backward graph pair up by the Dynamo graph
they came from (`dynamo_graph`, one per compile).

The activations a training forward saves keep the strides lowering gave them (NHWC in a
channels-last graph), and the forward reports its output strides to AOTAutograd
(`TracingContext.report_output_strides`), which restrides the backward's example inputs
before compiling it: the backward's lowering reads its inputs' strides from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.ir.nodes import InputBuffer, Stored


def output_strides_line(work: Any) -> str:
    """The wrapper's OUTPUT_STRIDES line (`work`: a compile_fx.GraphWork after lowering),
    where a saved activation kept other strides than eager's: what the forward reports to
    AOTAutograd (`report_output_strides`), from the whole-graph cache too. Empty where
    every output has eager's strides."""
    lowered = work.lowered
    assert lowered is not None
    out = work.gm.graph.output_node().args[0]
    nodes = list(out) if isinstance(out, (list, tuple)) else [out]
    if not any(_restrided(o, n) for i, (o, n) in enumerate(zip(lowered.outputs, nodes))
               if i in work.free_outputs):
        return ""
    strides = [tuple(o.view.stride) if isinstance(o, Stored) else None
               for o in lowered.outputs]
    return ("\n\n# the strides AOTAutograd compiles the backward for (saved activations)\n"
            f"OUTPUT_STRIDES = {strides!r}\n")


def _restrided(value: Any, node: Any) -> bool:
    meta = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, Stored) or not isinstance(meta, torch.Tensor):
        return False
    return any(n != 1 and a != b for n, a, b in zip(value.size, value.view.stride,
                                                     meta.stride()))


def saved_outputs(gm: torch.fx.GraphModule) -> frozenset[int]:
    """The outputs of a training forward that are saved for backward, where AOTAutograd
    compiles the backward for the strides the forward reports (empty elsewhere: the
    explorer's pipeline, an unknown runtime)."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    first = getattr(meta, "num_forward", None)
    if ctx is None or getattr(ctx, "output_strides", None) is None or \
            not isinstance(first, int):
        return frozenset()
    out = gm.graph.output_node().args[0]
    count = len(out) if isinstance(out, (list, tuple)) else 1
    return frozenset(range(first, count))


def report_output_strides(compiled: Any) -> None:
    """Tell AOTAutograd the strides a forward returns, where its saved activations kept
    the graph's layout: it compiles the backward for them (as for Inductor's layouts)."""
    strides = getattr(getattr(compiled, "module", None), "OUTPUT_STRIDES", None)
    ctx = torch._guards.TracingContext.try_get()
    reported = getattr(ctx, "output_strides", None)
    if strides is not None and reported is not None and not reported:
        reported.extend(strides)


def traced_strides(gm: torch.fx.GraphModule) -> list[tuple[int, ...] | None]:
    """Each input's strides as the graph was traced (None: not a tensor of static size)."""
    out: list[tuple[int, ...] | None] = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            val = n.meta.get("val")
            ok = isinstance(val, torch.Tensor) and \
                all(isinstance(s, int) for s in (*val.shape, *val.stride()))
            out.append(tuple(int(s) for s in val.stride()) if ok else None)
    return out


def as_traced(args: Sequence[Any], strides: Sequence[tuple[int, ...] | None]) -> list[Any]:
    """`args` with each tensor copied into the strides its graph was traced with, where
    they differ: a backward run eagerly (its compile failed) gets the activations the
    compiled forward saved NHWC, and the traced graph may `view` them as NCHW."""
    out = list(args)
    for i, (a, st) in enumerate(zip(args, strides)):
        if isinstance(a, torch.Tensor) and st is not None and len(st) == a.dim() and \
                any(n != 1 and x != y for n, x, y in zip(a.shape, a.stride(), st)) and \
                all(x != 0 or n == 1 for n, x in zip(a.shape, st)):  # no overlap to copy to
            out[i] = torch.empty_strided(a.shape, st, dtype=a.dtype, device=a.device).copy_(a)
    return out


def pairs(kinds: Sequence[tuple[str, int]]) -> list[tuple[int, int]]:
    """(forward index, backward index) for each (kind, dynamo_graph) pair in `kinds`."""
    forwards = {dg: i for i, (kind, dg) in enumerate(kinds) if kind == "forward"}
    return [(forwards[dg], i) for i, (kind, dg) in enumerate(kinds)
            if kind == "backward" and dg in forwards]


def output_names(gm: torch.fx.GraphModule) -> list[str | None]:
    out = gm.graph.output_node().args[0]
    items = out if isinstance(out, (list, tuple)) else [out]
    return [a.name if isinstance(a, torch.fx.Node) else None for a in items]


def saved_inputs(forward: torch.fx.GraphModule, backward: torch.fx.GraphModule
                 ) -> list[tuple[int, int]]:
    """(forward output index, backward input index) of every value saved for backward."""
    position = {name: i for i, name in enumerate(output_names(forward)) if name is not None}
    placeholders = [n for n in backward.graph.nodes if n.op == "placeholder"]
    return [(position[p.name], j) for j, p in enumerate(placeholders)
            if not p.name.startswith("tangents") and p.name in position]


def saved_activations(forward: Any, backward: Any) -> list[dict[str, Any]]:
    """The forward graph's memory plan entries for what it keeps for backward: the node,
    the buffer holding it (None: a graph input, which costs no new memory), its bytes and
    the backward graph's input it becomes. `forward`/`backward` are compile_fx.GraphWork
    after `memory`."""
    assert forward.lowered is not None and forward.memory is not None
    planned = {p.name: p.bytes for p in forward.memory.buffers}
    outputs = forward.lowered.outputs
    names = output_names(forward.gm)
    bw_inputs = [n.name for n in backward.gm.graph.nodes if n.op == "placeholder"]
    saved = []
    for out_index, in_index in saved_inputs(forward.gm, backward.gm):
        value = outputs[out_index] if out_index < len(outputs) else None
        buffer = value.buffer if isinstance(value, Stored) else None
        held = None if buffer is None or isinstance(buffer, InputBuffer) else buffer.name
        nbytes = planned.get(held) if held else None
        if buffer is not None and held and nbytes is None:
            nbytes = buffer.layout.nbytes()
        saved.append({"node": names[out_index], "buffer": held, "bytes": nbytes,
                      "backward_input": bw_inputs[in_index]})
    return saved


def chained_check(forward: Any, backward: Any, fresh: Any, options: Any) -> dict[str, Any]:
    """The backward graph run on what the compiled forward saved (as training runs it),
    against the backward graph run eagerly on what the eager forward saved (the captured
    inputs). `fresh(inputs)` copies inputs; both works have been compiled."""
    from kernelscope.compiler import check

    assert forward.compiled is not None and backward.compiled is not None
    saved = forward.compiled(*fresh(forward.example_inputs))
    args = fresh(backward.example_inputs)
    for out_index, in_index in saved_inputs(forward.gm, backward.gm):
        args[in_index] = saved[out_index]
    got = backward.compiled(*args)
    ref, _ = check.reference(backward.gm, fresh(backward.example_inputs))
    result = check.compare_outputs(got, ref, options)
    return {"forward": forward.gid, "backward": backward.gid, "ok": result["ok"],
            "outputs": result["outputs"]}
