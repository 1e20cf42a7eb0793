"""TorchDynamo backends: the real one (compile every graph) and the recording one.

Dynamo hands a backend one FX graph per captured region (a graph break starts a new
one). AOTAutograd functionalizes it and lowers it to ATen with our decomposition table;
its forward (and, when gradients are needed, backward) graph then goes to `compile_fx`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

from compiler.capture.decompositions import decomposition_table
from compiler.options import CompileOptions

if TYPE_CHECKING:
    from torch._functorch._aot_autograd.schemas import AOTDispatchCompiler


def make_backend(options: CompileOptions, filename: str | None = None,
                 sink: list[Any] | None = None
                 ) -> Callable[[torch.fx.GraphModule, list[Any]], Any]:
    """A torch.compile backend that compiles every ATen graph with Kernelscope.

    `sink`, if given, collects each CompiledGraph (the profiler times their kernels).
    """
    from compiler.compile_fx import compile_fx
    from compiler.lowering.graph import Unsupported

    counter = [0]

    def compile_aten(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        gid = counter[0]
        counter[0] += 1
        try:
            compiled = compile_fx(gm, example_inputs, options, filename, gid)
        except Unsupported as e:
            warnings.warn(f"kernelscope: running graph {gid} eagerly: {e}", stacklevel=2)
            return make_boxed_func(gm.forward)
        if sink is not None:
            sink.append(compiled)
        return make_boxed_func(compiled)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        return aot_module_simplified(gm, example_inputs, fw_compiler=compile_aten,
                                     bw_compiler=compile_aten,
                                     decompositions=decomposition_table())

    return backend


@dataclass
class CapturedGraph:
    gm: torch.fx.GraphModule
    example_inputs: list[Any]
    kind: str  # "forward" | "backward"
    compile_id: str | None = None  # the Dynamo frame compile it came from ("0/0")


@dataclass
class Recorder:
    """A backend that keeps every ATen graph and runs it eagerly (the capture stage)."""

    graphs: list[CapturedGraph] = field(default_factory=list)
    dynamo_graphs: int = 0

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.dynamo_graphs += 1
        compile_id = str(torch._guards.CompileContext.current_compile_id())

        def keep(kind: str) -> AOTDispatchCompiler:
            def compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
                self.graphs.append(CapturedGraph(gm, list(example_inputs), kind, compile_id))
                return make_boxed_func(gm.forward)

            return compiler

        return aot_module_simplified(gm, example_inputs, fw_compiler=keep("forward"),
                                     bw_compiler=keep("backward"),
                                     decompositions=decomposition_table())
