"""How the compiler names an ATen op (or another FX call target), in one place.

`op_name` is the full name the events carry (`aten.add.Tensor`), `op_short` the part a
kernel or extern step is named after (`add`), `op_call` the expression a generated
wrapper calls (`torch.ops.aten.add.Tensor`).
"""

from __future__ import annotations

from typing import Any

import torch


def op_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if hasattr(target, "_schema"):
        ns, name = target._schema.name.split("::")
        return f"{ns}.{name}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


def op_short(target: Any) -> str:
    name = op_name(target)
    return name.split(".")[1] if "." in name else name


def op_call(target: Any) -> str:
    if isinstance(target, torch._ops.HigherOrderOperator):  # with_effects, ...
        return f"torch.ops.higher_order.{target.name()}"
    return f"torch.ops.{op_name(target) if hasattr(target, '_schema') else target}"
