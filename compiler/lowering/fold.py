"""Small constant subgraphs computed once, at compile time, and small constants put on the
device that reads them.

A graph can hold tensors of its own (`_tensor_constant0`, from `torch.tensor(...)` in the
model) and compute on them alone: DeBERTa-v2's attention scale is
`sqrt(tensor(d) * factor)`, made on the CPU and read by a CUDA division. Lowered as written,
that is a C++ kernel and a copy to the GPU on every call, and PyTorch's blocking host-to-
device copy waits for the GPU each time. Inductor folds such subgraphs at compile time.
Here too: an op whose every input is a graph constant, that draws no random numbers and
mutates nothing, and whose result has at most FOLD_MAX_NUMEL elements, is run once on the
constants (real tensors) and becomes a constant itself; then a constant on another device
than the graph's, small and read only by ops that compute on the graph's device, is moved
there once. Each step is said in the returned notes (the lowering event shows them).

In: the ATen graph module and its device. Out: the same module, rewritten in place.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import unset_fake_temporarily

from kernelscope.compiler.devices import device_type, is_gpu
from kernelscope.compiler.lowering.devices import result_device

FOLD_MAX_NUMEL = 4096  # a folded result this size or smaller (it is held by the graph)


def _value(gm: torch.fx.GraphModule, node: torch.fx.Node) -> Any:
    return operator.attrgetter(str(node.target))(gm)


def _foldable(node: torch.fx.Node, consts: set[torch.fx.Node]) -> bool:
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    if target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
        return False
    inputs = node.all_input_nodes
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.numel() > FOLD_MAX_NUMEL:
        return False
    if is_gpu(device_type(val)) and not torch.cuda.is_available():
        return False  # a CUDA graph traced on a host without one (it is never run here)
    return bool(inputs) and all(i in consts for i in inputs)


def _fresh(gm: torch.fx.GraphModule) -> str:
    i = 0
    while hasattr(gm, f"_folded_constant{i}"):
        i += 1
    return f"_folded_constant{i}"


def _fold(gm: torch.fx.GraphModule, node: torch.fx.Node, consts: set[torch.fx.Node]) -> str | None:
    args, kwargs = torch.fx.map_arg((node.args, node.kwargs), lambda n: _value(gm, n))
    with unset_fake_temporarily():
        value = node.target(*args, **kwargs)  # type: ignore[operator]
    if not isinstance(value, torch.Tensor):
        return None
    name = _fresh(gm)
    gm.register_buffer(name, value)
    with gm.graph.inserting_before(node):
        const = gm.graph.get_attr(name)
    const.meta = dict(node.meta)
    node.replace_all_uses_with(const)
    gm.graph.erase_node(node)
    consts.add(const)
    return f"{node.name}: computed at compile time from graph constants only (as {name})"


def _move(gm: torch.fx.GraphModule, node: torch.fx.Node, device: str) -> str | None:
    value = _value(gm, node)
    if not isinstance(value, torch.Tensor) or device_type(value) == device or \
            value.numel() > FOLD_MAX_NUMEL or not node.users:
        return None
    if is_gpu(device) and not torch.cuda.is_available():
        return None  # a CUDA graph traced on a host without one (it is never run here)
    if any(result_device(u.meta.get("val")) != device for u in node.users):
        return None
    with unset_fake_temporarily():  # a real copy, also where a fake mode is active
        setattr(gm, str(node.target), value.to(device))
    return (f"{node.name}: graph constant moved from {value.device} to {device} once, at "
            f"compile time: every op that reads it computes on {device}")


def fold_constants(gm: torch.fx.GraphModule, device: str) -> list[str]:
    """Fold `gm`'s small constant-only ops and move its small constants to `device`."""
    notes: list[str] = []
    consts = {n for n in gm.graph.nodes if n.op == "get_attr"}
    for node in list(gm.graph.nodes):
        if _foldable(node, consts) and (note := _fold(gm, node, consts)):
            notes.append(note)
    for node in list(gm.graph.nodes):
        if node.op != "get_attr":
            continue
        if not node.users:
            gm.graph.erase_node(node)
        elif note := _move(gm, node, device):
            notes.append(note)
    if notes:
        gm.recompile()
    return notes
