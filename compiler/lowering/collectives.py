"""Functional collectives lower to extern calls: the wrapper calls the
`_c10d_functional` op itself, on the process group the graph was traced with.

In: an FX node calling a collective (all-gather, reduce-scatter, all-reduce, all-to-all,
broadcast) or `wait_tensor`. Out: an `ExternKernel` that is the plan, not a fallback: the
communication is the process group's to do, and the op is what eager calls. What each one
moves, and which buffers it holds until its wait, is compiler/ir/collectives.py's to say;
the memory plan keeps those buffers alive until the wait (schedule/memory.py).
"""

from __future__ import annotations

from typing import Any

from torch.fx import Node

from kernelscope.compiler.ir.collectives import KINDS, NAMESPACE, WAIT
from kernelscope.compiler.lowering.common import LoweringContext
from kernelscope.compiler.lowering.registry import register_lowering_by_name


@register_lowering_by_name(*(f"{NAMESPACE}::{name}" for name in (*KINDS, WAIT)))
def collective(g: LoweringContext, node: Node, *args: Any, **kwargs: Any) -> Any:
    return g.extern(node, node.target, args, kwargs, fallback=False)
