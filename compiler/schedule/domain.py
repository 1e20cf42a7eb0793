"""How a node's loop nest maps onto a kernel's iteration space: one rule for all.

A kernel iterates over `xnumel` outputs, each reducing `rnumel` elements. A pointwise
node of `xnumel * rnumel` elements that joins a reduction kernel runs over the
reduction's input: its leading dims (those whose product is `xnumel`) go to the output
domain and the rest to the reduction domain. Fusion (schedule/fusion.py) decides with
this rule whether a node reads a reduction at its own row; codegen (codegen/kernel.py)
builds the node's index variables with it. Both must agree, so both call `split_point`.
"""

from __future__ import annotations

from collections.abc import Sequence


def split_point(ranges: Sequence[int], outer_numel: int) -> int | None:
    """The first k with prod(ranges[:k]) == outer_numel, or None when no prefix of the
    dims multiplies to it (the node then runs through its flat position)."""
    acc = 1
    for k in range(len(ranges) + 1):
        if acc == outer_numel:
            return k
        if k < len(ranges):
            acc *= ranges[k]
    return None
