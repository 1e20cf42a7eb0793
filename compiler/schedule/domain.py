"""How a node's loop nest maps onto a kernel's iteration space: one rule for all.

A pointwise node over a reduction's input runs its leading dims (whose product is
`xnumel`) over the outputs, the rest over the reduction. Fusion and codegen must agree on
that split, so both call `split_point`.
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
