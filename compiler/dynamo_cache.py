"""Warm compiles without AOTAutograd, for inference graphs where it does nothing at run time.

A warm torch.compile still pays Dynamo (as Inductor does) and then AOTAutograd's tracing
of the Dynamo graph to ATen, which Inductor's own AOTAutograd cache skips. AOTAutograd's
product is the ATen graph plus a runtime wrapper; for an inference graph that mutates no
input, returns no alias, holds no constant and takes its inputs one for one, that wrapper
only passes the arguments through. For such a graph the cold compile records that the
Dynamo graph's key leads to the ATen graph's whole-graph cache entry
(compiler/runtime/graph_cache.py); a warm compile with the same key loads that entry
directly. Anything else (grad mode on, autocast, custom ops, CUDA graphs, any of the
runtime's jobs) takes the ordinary path, which the whole-graph cache still shortens.

In: the Dynamo graph and its example inputs; inside the ATen compile, AOTAutograd's
metadata (`TracingContext.fw_metadata`). Out: the Dynamo-level key, and why a graph's
runtime is not the identity ("" when it is).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime import graph_cache

BUILTIN_NAMESPACES = ("aten", "prims")


def dynamo_key(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
               options: CompileOptions) -> tuple[str | None, str]:
    """The key of a Dynamo graph whose warm compile may skip AOTAutograd, or (None, why)."""
    if torch.is_grad_enabled():
        return None, "grad mode is on (AOTAutograd may build a backward graph)"
    if torch._C._is_any_autocast_enabled():
        return None, "autocast is on"
    if options.cuda_graphs:
        return None, "CUDA graphs take static inputs from AOTAutograd"
    for node in gm.graph.nodes:
        ns = getattr(node.target, "namespace", None)
        if node.op == "call_function" and ns is not None and ns not in BUILTIN_NAMESPACES:
            return None, f"node {node.name} calls a custom op ({ns})"
    functorch = hashlib.sha256(torch._functorch.config.save_config()).hexdigest()
    context = {"stage": "dynamo", "inference_mode": torch.is_inference_mode_enabled(),
               "deterministic": torch.are_deterministic_algorithms_enabled(),
               "functorch": functorch}
    # The tools of the backend the snippet's device gets: the ATen graph the entry links
    # to is keyed by its own graph's backend.
    tools = choose_backend(options.backend, options.device, options).cache_identity()
    return graph_cache.graph_key(gm, list(example_inputs), options, context, tools)


def identity_runtime(gm: torch.fx.GraphModule, dynamo_inputs: int) -> str:
    """Why AOTAutograd's runtime around the ATen graph being compiled does more than call
    it with the Dynamo graph's arguments ("" when it does not). Called from inside the
    ATen compile, where AOTAutograd's metadata is in the tracing context."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    if meta is None:
        return "no AOTAutograd metadata"
    try:
        return next((why for ok, why in _checks(gm, meta, dynamo_inputs) if not ok), "")
    except Exception as e:  # noqa: BLE001 - metadata of another torch: take the safe path
        return f"could not read AOTAutograd's metadata: {type(e).__name__}: {e}"


def _checks(gm: torch.fx.GraphModule, meta: Any, dynamo_inputs: int) -> list[tuple[bool, str]]:
    from torch._functorch._aot_autograd.schemas import OutputType

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    outputs = next(n for n in reversed(gm.graph.nodes) if n.op == "output").args[0]
    return [
        (len(meta.input_info) == len(placeholders) == dynamo_inputs,
         "AOTAutograd added or merged inputs"),
        # (an input's requires_grad does not matter: dynamo_key asks for grad mode off)
        (not any(i.mutates_data or i.mutates_metadata
                 or getattr(i, "mutates_storage_metadata", False) for i in meta.input_info),
         "an input is mutated"),
        (len(meta.output_info) == len(outputs), "the graph returns more than the user's outputs"),
        (all(o.output_type == OutputType.non_alias and not o.requires_grad
             for o in meta.output_info), "an output aliases an input or needs a gradient"),
        (not meta.num_intermediate_bases and not getattr(meta, "tokens", None)
         and not meta.traced_tangents, "intermediate bases, effect tokens or tangents"),
        (not getattr(meta, "is_rng_op_functionalized", False)
         and not getattr(meta, "num_graphsafe_rng_states", 0), "functionalized RNG"),
        (not any(type(m).__name__ == "SubclassCreationMeta"
                 for m in (*meta.subclass_inp_meta, *meta.subclass_fw_graph_out_meta)),
         "tensor subclasses"),
        (not any(n.op == "get_attr" for n in gm.graph.nodes), "the graph holds constants"),
    ]
