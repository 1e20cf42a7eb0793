"""2-D tiling for pointwise kernels that read (or write) an operand transposed.

A 1-D block walks memory along one dimension; when one access is contiguous along the
rows and another along the columns, half the loads are strided and uncoalesced. Such a
kernel instead iterates over [YBLOCK, XBLOCK] tiles of a 2-D view (Y, X) of its
iteration space, so that both accesses read whole runs of memory within a tile.

`choose_tile` decides, and says why: the reason goes into the kernel's header comment.
`choose_rows` is the C++ backend's 2-D shape: rows outside, one `omp simd` row inside.
`column_walk` says whether a Triton reduction's loads run along its outputs (x.sum(0),
a bias gradient): such a kernel takes column tiles (triton_rules.column_config).
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
    """Tiles for a kernel where some access is contiguous along the innermost (merged)
    dim and another along an outer one, k: the rows are the dims up to k, the columns
    those after it (x + y.t(): 2-D; a batch of them, NHWC read and NCHW written: rows
    n*c, columns h*w). Broadcast accesses (stride 0 along the columns) do not count."""
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
    """(rows, row length) for a pointwise kernel whose flat loop would need a division or
    a modulo in some index (`x + b` with b broadcast along rows, a transposed operand):
    it loops over rows outside and along each row inside, so the inner loop is an
    `omp simd` loop of contiguous (or broadcast) loads and no index needs `%` or `/`."""
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
    """A kernel walks its outputs in this order of dims (outermost first) instead of the
    logical one: the memory order of the buffer it stores, when that is a permutation
    (NHWC between convolutions), so that neighbouring threads write, and read from
    same-layout inputs, neighbouring elements."""

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
