"""TorchDynamo capture: the recording backend of the `capture` stage.

Dynamo hands a backend one FX graph per captured region (a graph break starts a new
one). AOTAutograd functionalizes it and lowers it to ATen with our decomposition table;
the recorder keeps its forward (and, when gradients are needed, backward) graph. The
compiling backend that torch.compile uses is `compiler.compile_fx.make_backend`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

from compiler.capture.decompositions import decomposition_table

if TYPE_CHECKING:
    from torch._functorch._aot_autograd.schemas import AOTDispatchCompiler


@dataclass
class CapturedGraph:
    gm: torch.fx.GraphModule
    example_inputs: list[Any]
    kind: str  # "forward" | "backward"


@dataclass
class Recorder:
    """A backend that keeps every ATen graph and runs it eagerly (the capture stage)."""

    graphs: list[CapturedGraph] = field(default_factory=list)
    dynamo_graphs: int = 0

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.dynamo_graphs += 1

        def keep(kind: str) -> AOTDispatchCompiler:
            def compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
                self.graphs.append(CapturedGraph(gm, list(example_inputs), kind))
                return make_boxed_func(gm.forward)

            return compiler

        return aot_module_simplified(gm, example_inputs, fw_compiler=keep("forward"),
                                     bw_compiler=keep("backward"),
                                     decompositions=decomposition_table())
