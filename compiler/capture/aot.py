"""Handing a Dynamo graph to AOTAutograd: the one call both of our Dynamo backends make (the
`torch.compile` backend in compile_fx.py and the explorer's capture in capture/dynamo.py).

In: a Dynamo graph, its example inputs, the partition rule and the compilers for the
forward, backward and inference graphs. Out: AOTAutograd's callable, with our decomposition
table.

The partition rule decides what a training graph's forward saves for its backward.
"min_cut" (the default, as Inductor's) is AOTAutograd's min-cut rematerialization: the
backward recomputes cheap pointwise work from a few saved tensors instead of reading every
intermediate back from memory (on a GPT-2 step the forward's GELU alone saved five
tensors). "default" is AOTAutograd's default partition: every intermediate the backward
reads is saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.fx
from torch._dynamo.utils import counters
from torch._functorch.aot_autograd import aot_module_simplified
from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition

from kernelscope.compiler.capture.decompositions import decomposition_table

PARTITIONS: dict[str, Callable[..., Any]] = {
    "min_cut": min_cut_rematerialization_partition, "default": default_partition}


def through_aot(gm: torch.fx.GraphModule, example_inputs: list[Any], partition: str,
                **compilers: Any) -> Any:
    # Counted as Dynamo's own AOTAutograd backends count (torch._dynamo.backends.common):
    # DDPOptimizer reads this counter to learn that the bucket it just compiled went through
    # AOTAutograd, whose forward then answers its first call with fake outputs; it makes that
    # call itself, at compile time. Uncounted, the first real step got those fake tensors.
    if partition not in PARTITIONS:
        raise ValueError(f"unknown partition {partition!r}: one of {', '.join(PARTITIONS)}")
    counters["aot_autograd"]["total"] += 1
    return aot_module_simplified(gm, example_inputs, decompositions=decomposition_table(),
                                 partition_fn=PARTITIONS[partition], **compilers)
