"""The lowering table: `@register_lowering(aten.add)` maps ATen ops to IR builders.

A lowering is `fn(g, *args, **kwargs)`: `g` is the GraphLowering driving this graph
(passed explicitly; there is no global graph), tensors arrive as `TensorValue`s and it
returns a TensorValue (or a tuple of them). Lowerings never emit code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

LoweringFn = Callable[..., Any]
LOWERINGS: dict[Any, LoweringFn] = {}
aten = torch.ops.aten
prims = torch.ops.prims


def register_lowering(*ops: Any) -> Callable[[LoweringFn], LoweringFn]:
    def decorator(fn: LoweringFn) -> LoweringFn:
        for op in ops:
            LOWERINGS[op] = fn
        return fn

    return decorator


# Lowerings of ops that exist only once another library defines them (prims.fma is
# Inductor's, and appears in graphs only when Inductor is loaded), by qualified name.
LOWERINGS_BY_NAME: dict[str, LoweringFn] = {}


def register_lowering_by_name(*names: str) -> Callable[[LoweringFn], LoweringFn]:
    def decorator(fn: LoweringFn) -> LoweringFn:
        for name in names:
            LOWERINGS_BY_NAME[name] = fn
        return fn

    return decorator


def find_lowering(target: Any) -> LoweringFn | None:
    if target in LOWERINGS:
        return LOWERINGS[target]
    packet = getattr(target, "overloadpacket", None)
    if packet is None:
        return None
    return LOWERINGS.get(packet) or LOWERINGS_BY_NAME.get(
        getattr(packet, "_qualified_op_name", ""))


def load_all() -> None:
    """Import the modules whose decorators fill the table."""
    from compiler.lowering import (  # noqa: F401
        conv,
        distances,
        indexing,
        mathfns,
        matmul,
        misc,
        pointwise,
        pooling,
        reductions,
        scans,
        scatter,
        softmax,
        sorting,
        views,
    )
