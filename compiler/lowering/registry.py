"""The lowering table: `@register_lowering(aten.add)` maps ATen ops to IR builders.

A lowering is `fn(g, node, *args, **kwargs)` (lowering/common.py says what `g` offers); the
node's arguments follow, tensors as `TensorValue`s, and it returns a TensorValue (or a
tuple of them), never code. Registering a function whose second parameter is not `node`
fails at import, so a lowering written against another signature is found at once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Concatenate

import torch
from torch.fx import Node

from kernelscope.compiler.lowering.common import LoweringContext

LoweringFn = Callable[Concatenate[LoweringContext, Node, ...], Any]
LOWERINGS: dict[Any, LoweringFn] = {}
aten = torch.ops.aten
prims = torch.ops.prims


def _check_signature(fn: LoweringFn) -> None:
    params = list(inspect.signature(fn).parameters)
    if params[:2] != ["g", "node"]:
        raise TypeError(f"lowering {fn.__qualname__} takes ({', '.join(params[:2])}, ...): "
                        "a lowering is fn(g, node, *args, **kwargs)")


def _registrar(table: dict[Any, LoweringFn], keys: tuple[Any, ...]
               ) -> Callable[[LoweringFn], LoweringFn]:
    def decorator(fn: LoweringFn) -> LoweringFn:
        _check_signature(fn)
        for key in keys:
            table[key] = fn
        return fn

    return decorator


def register_lowering(*ops: Any) -> Callable[[LoweringFn], LoweringFn]:
    return _registrar(LOWERINGS, ops)


# Lowerings of ops that exist only once another library defines them (prims.fma is
# Inductor's, and appears in graphs only when Inductor is loaded), by qualified name.
LOWERINGS_BY_NAME: dict[str, LoweringFn] = {}


def register_lowering_by_name(*names: str) -> Callable[[LoweringFn], LoweringFn]:
    return _registrar(LOWERINGS_BY_NAME, names)


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
    from kernelscope.compiler.lowering import (  # noqa: F401
        collectives,
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
