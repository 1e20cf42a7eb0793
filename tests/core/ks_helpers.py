"""Helpers shared by the compiler tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "samples").glob("*.py"))


def lower_fn(fn: Callable[..., Any], *args: Any, interpret: bool = False) -> Any:
    """Capture fn with our decompositions and lower each ATen graph (no codegen).

    Returns the (graph module, LoweredGraph) pairs; with interpret=True, returns fn's
    result computed by the reference interpreter over the lowered graphs instead.
    """
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from compiler.capture.decompositions import decomposition_table
    from compiler.lowering.graph import GraphLowering
    from compiler.runtime.interpret import interpret as run_ir

    lowered: list[Any] = []

    def fw(gm: Any, inputs: Any) -> Any:
        graph = GraphLowering(gm, inputs).run()
        lowered.append((gm, graph))
        if interpret:
            return make_boxed_func(lambda *real: run_ir(graph, list(real)))
        return make_boxed_func(gm.forward)

    def backend(gm: Any, inputs: Any) -> Any:
        return aot_module_simplified(gm, inputs, fw_compiler=fw,
                                     decompositions=decomposition_table())

    torch._dynamo.reset()
    with torch.no_grad():
        result = torch.compile(fn, backend=backend)(*args)
    return result if interpret else lowered


def compiled(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    from compiler import backend

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, options=options or None)
