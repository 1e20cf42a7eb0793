"""Loop shapes chosen from how a kernel's accesses walk memory, each with its reason.

`choose_tile`: [YBLOCK, XBLOCK] tiles for a Triton pointwise kernel with one access
contiguous along the rows and another along the columns (a transpose), so both read
whole runs. `choose_rows`: C++'s rows outside, one `omp simd` row inside. `memory_order`:
walk a permuted (NHWC) output in its memory order. `column_walk`: column tiles for a
reduction whose loads run along its outputs (x.sum(0)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sympy

from kernelscope.compiler.codegen.common import RINDEX, XINDEX, next_power_of_2
from kernelscope.compiler.ir.indexing import (
    decompose,
    index_vars,
    linear_stride,
    merge_loops,
    steps_along_outputs,
    sym,
)
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.plan import KernelPlan

YINDEX = sym("yindex")
MAX_GRID_Y = 65535  # CUDA's limit on the second grid dimension
ROW_MIN = 16  # C++: a pointwise kernel's rows shorter than this stay one flat loop


@dataclass(frozen=True)
class Tile:
    y: int  # rows of the 2-D view (outer dims)
    x: int  # columns (inner dims)
    reason: str


def choose_tile(plan: KernelPlan) -> Tile | None:
    """Tiles where some access is contiguous along the innermost (merged) dim and another
    along an outer one, k: rows are the dims up to k, columns those after (x + y.t()).
    Broadcast accesses (stride 0 along the columns) do not count."""
    if plan.kind is not KernelKind.POINTWISE:
        return None
    shape: tuple[int, ...] | None = None
    inner = outer = None
    split = 0
    for node in plan.nodes:
        ranges = list(node.ranges)
        variables = index_vars("i", len(ranges))
        exprs = [e for idx in node.reads.values() for e in idx] + [node.write_index()]
        sizes, rewrite = merge_loops(ranges, exprs, variables)
        if len(sizes) < 2 or (shape is not None and tuple(sizes) != shape):
            return None
        shape = tuple(sizes)
        cs = index_vars("c", len(sizes))
        named = [(name, e) for name, idx in node.reads.items() for e in idx]
        named.append((node.name, node.write_index()))
        for name, e in named:
            e2 = rewrite(e, cs)
            strides = [linear_stride(e2, c) for c in cs]
            last = strides[-1]
            if last == 1:
                inner = inner or name
            elif last is not None and last != 0 and 1 in strides[:-1] and outer is None:
                outer, split = name, strides.index(1) + 1  # a walk down the columns
    if shape is None or inner is None or outer is None:
        return None
    y, x = math.prod(map(int, shape[:split])), math.prod(map(int, shape[split:]))
    if y < 16 or x < 16:
        return None
    return Tile(y, x, f"2-D tiles over {y} x {x}: {outer} runs along the rows, "
                      f"{inner} along the columns")


def tile_config(tile: Tile) -> dict[str, int]:
    yblock = min(64, next_power_of_2(tile.y))
    xblock = min(64, next_power_of_2(tile.x))
    return {"YBLOCK": yblock, "XBLOCK": xblock, "num_warps": 4 if yblock * xblock >= 2048 else 2}


def fits_grid(tile: Tile, yblock: int) -> bool:
    return -(-tile.y // yblock) <= MAX_GRID_Y


def choose_rows(plan: KernelPlan) -> tuple[int, int] | None:
    """(rows, row length) for a pointwise kernel whose flat loop would need a `/` or `%`
    in some index (a broadcast bias, a transposed operand): the inner loop over a row
    is then an `omp simd` loop with no division."""
    if plan.kind is not KernelKind.POINTWISE:
        return None
    for node in plan.nodes:
        ranges = list(node.ranges)
        exprs = [e for idx in node.reads.values() for e in idx] + [node.write_index()]
        sizes, _ = merge_loops(ranges, exprs, index_vars("i", len(ranges)))
        if len(sizes) > 1:
            x = int(sizes[-1])
            return (plan.xnumel // x, x) if x >= ROW_MIN else None
    return None


@dataclass(frozen=True)
class Order:
    """A walk of the outputs in the memory order of the stored buffer (dims outermost
    first) when that is a permutation (NHWC), so neighbouring threads touch neighbours."""

    size: tuple[int, ...]
    dims: tuple[int, ...]
    reason: str

    def coords(self, ranges: Sequence[int]) -> list[Any] | None:
        """A node's coordinates over `ranges` as xindex walks them in this order, or None
        where its dims of size above 1 are not this order's (in the same logical order)."""
        mine = [k for k, r in enumerate(ranges) if r != 1]
        theirs = [k for k, s in enumerate(self.size) if s != 1]
        if [ranges[k] for k in mine] != [self.size[k] for k in theirs]:
            return None
        to_mine = dict(zip(theirs, mine))
        walked = [to_mine[k] for k in self.dims if self.size[k] != 1]
        coords: list[Any] = [sympy.Integer(0)] * len(ranges)
        for k, v in zip(walked, decompose(XINDEX, [ranges[k] for k in walked])):
            coords[k] = v
        return coords


def memory_order(plan: KernelPlan) -> Order | None:
    if not plan.stores:
        return None
    lay = plan.buffers[plan.stores[0]].layout
    size, stride = tuple(lay.size), tuple(lay.stride)
    dims = tuple(sorted(range(len(size)), key=lambda k: (-stride[k], k)))
    real = [k for k in dims if size[k] != 1]
    if real == sorted(real):
        return None
    order = Order(size, dims, f"iterates in the memory order of {plan.stores[0]} "
                              f"(dims {', '.join(map(str, dims))}, outermost first)")
    if not plan.kind.reduces:
        # Any bijection of xindex onto a node's elements is right: other nodes' values
        # are recomputed at the index they are read at.
        return order if any(order.coords(n.ranges) is not None for n in plan.nodes) else None
    # A reduction's result is read back from its register whatever the index: every node
    # over the outputs must walk them the same way.
    outputs = [n for n in plan.nodes if n.kind.reduces or n.numel == plan.xnumel]
    return order if all(order.coords(n.ranges) is not None for n in outputs) else None


def column_walk(loads: Sequence[sympy.Expr], xnumel: int, rnumel: int) -> str | None:
    """Why a reduction's loads along rindex (indices before naming) call for column
    tiles, or None: each steps 1 along the outputs (neighbouring outputs share a cache
    line) or not at all (a per-row value), and at least one steps 1 along them."""
    if rnumel < 2 or not loads:
        return None
    steps = steps_along_outputs(loads, XINDEX, xnumel, RINDEX, rnumel)
    if steps is None or not steps[0]:
        return None
    along, still = steps
    if still:
        return (f"column tiles: {along} of {along + still} loads step 1 along the {xnumel} "
                f"outputs, the rest are per-row values")
    return f"column tiles: every load steps 1 along the {xnumel} outputs"
