"""Mixed-device graphs: which device each op's operands must be on, and the copies that
put them there.

A graph that computes on CUDA can still hold CPU tensors: a factory called without a
device (`torch.zeros(4)`), a 0-d CPU scalar tensor, a CPU index tensor of `index_put`.
Eager reads those across devices inside one op; a generated kernel cannot (a Triton
kernel dereferencing host memory fails at launch). So an op whose result lives on one
device reads every tensor operand from that device: an operand on another device is
copied there first by an ATen `_to_copy` step, said in the graph's notes. Ops that move
values between devices (the copies themselves) are left to their own lowering.

In: an FX node's lowered operands and its meta. Out: the operands, on the node's device.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kernelscope.compiler.devices import device_type
from kernelscope.compiler.ir.indexing import contiguous_strides
from kernelscope.compiler.ir.nodes import ExternKernel, Layout, Stored, TensorValue
from kernelscope.compiler.lowering.common import LoweringContext

aten = torch.ops.aten

# Ops whose lowering is the device move itself (lowering/pointwise.py `_copy_of`).
MOVES = frozenset({aten._to_copy, aten.copy, aten.copy_, aten.clone, aten.lift_fresh_copy,
                   aten.alias, aten.detach, aten.contiguous})


def result_device(meta: Any) -> str | None:
    """The device an op's result lives on (the first tensor of a tuple result)."""
    if isinstance(meta, torch.Tensor):
        return device_type(meta)
    if isinstance(meta, (tuple, list)):
        return next((d for m in meta if (d := result_device(m)) is not None), None)
    return None


def on_device(g: LoweringContext, node: torch.fx.Node, args: Any, kwargs: Any) -> tuple[Any, Any]:
    """`args` and `kwargs` with every tensor operand on the node's result device."""
    device = result_device(node.meta.get("val"))
    if device is None or getattr(node.target, "overloadpacket", None) in MOVES:
        return args, kwargs
    moved: dict[int, Any] = {}

    def move(v: Any) -> Any:
        if not isinstance(v, TensorValue) or v.device == device:
            return v
        if id(v) not in moved:
            moved[id(v)] = copy_to(g, node, v, device)
        return moved[id(v)]

    return (torch.fx.node.map_aggregate(args, move),
            torch.fx.node.map_aggregate(kwargs, move))


def copy_to(g: LoweringContext, node: torch.fx.Node, v: TensorValue, device: str) -> Stored:
    """An ATen copy of `v` onto `device` (contiguous), as one extern step."""
    src = g.realize(v, f"copied to {device} for {node.name}")
    size = tuple(int(s) for s in v.size)
    layout = Layout(device, v.dtype, size, tuple(contiguous_strides(size)), 0)
    name = g.new_name()
    buf = ExternKernel(name, layout, frozenset([node.name]), aten._to_copy.default,
                       (src.as_arg(),), {"device": torch.device(device),
                                         "memory_format": torch.contiguous_format},
                       [], False)
    g.buffers.append(buf)
    g.notes.append(f"{node.name}: {src.buffer.name} ({v.device}, shape {list(size)}) "
                   f"copied to {device} as {name}: a {device} kernel reads only {device} "
                   "memory")
    return Stored(buf, layout)
