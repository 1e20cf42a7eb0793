"""Handing a Dynamo graph to AOTAutograd: the one call both of our Dynamo backends make (the
`torch.compile` backend in compile_fx.py and the explorer's capture in capture/dynamo.py).

In: a Dynamo graph, its example inputs and the compilers for the forward, backward and
inference graphs. Out: AOTAutograd's callable, with our decomposition table.
"""

from __future__ import annotations

from typing import Any

import torch.fx
from torch._dynamo.utils import counters
from torch._functorch.aot_autograd import aot_module_simplified

from kernelscope.compiler.capture.decompositions import decomposition_table


def through_aot(gm: torch.fx.GraphModule, example_inputs: list[Any], **compilers: Any) -> Any:
    # Counted as Dynamo's own AOTAutograd backends count (torch._dynamo.backends.common):
    # DDPOptimizer reads this counter to learn that the bucket it just compiled went through
    # AOTAutograd, whose forward then answers its first call with fake outputs; it makes that
    # call itself, at compile time. Uncounted, the first real step got those fake tensors.
    counters["aot_autograd"]["total"] += 1
    return aot_module_simplified(gm, example_inputs, decompositions=decomposition_table(),
                                 **compilers)
