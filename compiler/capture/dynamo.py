"""TorchDynamo capture: the recording backend of the `capture` stage.

Dynamo hands a backend one FX graph per captured region (a graph break starts a new
one). AOTAutograd functionalizes it and lowers it to ATen with our decomposition table;
the recorder keeps its forward (and, when gradients are needed, backward) graph. The
compiling backend that torch.compile uses is `kernelscope.compiler.compile_fx.make_backend`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from kernelscope.compiler.capture.aot import through_aot
from kernelscope.compiler.capture.bundle import snapshot

if TYPE_CHECKING:
    from torch._functorch._aot_autograd.schemas import AOTDispatchCompiler


@dataclass
class CapturedGraph:
    gm: torch.fx.GraphModule
    example_inputs: list[Any]  # fake tensors, as AOTAutograd hands them to a compiler
    kind: str  # "forward" | "backward" | "inference"
    dynamo_graph: int = 0  # which Dynamo graph (graph break) it came from
    inputs: list[Any] | None = None  # the real values of its first call, cloned
    compile_id: str | None = None  # Dynamo's frame compile ("0/1": frame 0, second compile)


@dataclass
class Recorder:
    """A backend that keeps every ATen graph and runs it eagerly (the capture stage).

    Each graph remembers the real arguments of its first call: the bundle carries them so
    the back half can run the same graph on the same values.
    """

    graphs: list[CapturedGraph] = field(default_factory=list)
    dynamo_graphs: int = 0
    breaks: list[Any] = field(default_factory=list)  # Dynamo's GraphCompileReason per break
    ran: list[str | None] = field(default_factory=list)  # compile ids of the graphs run
    # Told of each graph (and its index) as AOTAutograd hands it over, before the snippet's
    # call goes on: the `capture_graph` events stream from here.
    on_graph: Callable[[CapturedGraph, int], None] | None = None
    # Told what runs now, in words (the `progress` events: compiler/progress.py).
    doing: Callable[[str], None] = lambda _: None
    partition: str = "min_cut"  # what a forward saves for its backward (capture/aot.py)

    def backend(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        dynamo_graph = self.dynamo_graphs
        self.dynamo_graphs += 1
        compile_id = torch._guards.CompileContext.current_compile_id()
        cid = None if compile_id is None else str(compile_id)
        reason = getattr(gm, "compile_subgraph_reason", None)
        if reason is not None and getattr(reason, "graph_break", False):
            self.breaks.append(reason)
        nodes = len(gm.graph.nodes)
        self.doing(f"AOTAutograd traces Dynamo graph {dynamo_graph} ({nodes} nodes) to ATen")

        def keep(kind: str) -> AOTDispatchCompiler:
            # A backward graph is compiled and run inside `loss.backward()`; when that call
            # sits in the snippet's compiled function Dynamo is still watching frames and
            # would trace this recorder (its snapshots) as the snippet's code: it never is.
            @torch._disable_dynamo  # type: ignore[misc]
            def compiler(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
                # AOTAutograd says which graph this is by the compiler it calls (it runs
                # the forward compiler of a training graph under no_grad, so grad mode
                # cannot tell a forward from an inference graph).
                captured = CapturedGraph(gm, list(example_inputs), kind, dynamo_graph,
                                         compile_id=cid)
                self.graphs.append(captured)
                if self.on_graph is not None:
                    self.on_graph(captured, len(self.graphs) - 1)
                self.doing(f"AOTAutograd wraps Dynamo graph {dynamo_graph}'s {kind} graph")

                @torch._disable_dynamo  # type: ignore[misc]
                def run(args: list[Any]) -> Any:
                    self.ran.append(cid)
                    what = f"Dynamo graph {dynamo_graph}'s {kind} graph"
                    self.doing(f"{what} runs eagerly")
                    if captured.inputs is None:
                        captured.inputs = [_snapshot(a) for a in args]
                    out = gm(*args)
                    self.doing(f"{what} ran; the snippet's call goes on" + (
                        " (AOTAutograd traces its backward when backward runs)"
                        if kind == "forward" else ""))
                    return out

                run._boxed_call = True  # type: ignore[attr-defined]
                return run

            return compiler

        return through_aot(gm, example_inputs, self.partition, fw_compiler=keep("forward"),
                           bw_compiler=keep("backward"), inference_compiler=keep("inference"))


def _snapshot(a: Any) -> Any:
    return snapshot(a) if isinstance(a, torch.Tensor) else a
