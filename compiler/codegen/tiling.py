"""2-D tiling for pointwise kernels that read (or write) an operand transposed.

A 1-D block walks memory along one dimension; when one access is contiguous along the
rows and another along the columns, half the loads are strided and uncoalesced. Such a
kernel instead iterates over [YBLOCK, XBLOCK] tiles of a 2-D view (Y, X) of its
iteration space, so that both accesses read whole runs of memory within a tile.

`choose_tile` decides, and says why: the reason goes into the kernel's header comment.
`choose_rows` is the C++ backend's 2-D shape: rows outside, one `omp simd` row inside.
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.codegen.common import next_power_of_2
from compiler.ir.indexing import index_vars, linear_stride, merge_loops, sym
from compiler.schedule.plan import KernelPlan

YINDEX = sym("yindex")
MAX_GRID_Y = 65535  # CUDA's limit on the second grid dimension
ROW_MIN = 16  # C++: a pointwise kernel's rows shorter than this stay one flat loop


@dataclass(frozen=True)
class Tile:
    y: int  # rows of the 2-D view (outer dims)
    x: int  # columns (inner dims)
    reason: str


def choose_tile(plan: KernelPlan) -> Tile | None:
    if plan.kind != "pointwise":
        return None
    shape: tuple[int, int] | None = None
    inner = outer = None
    for node in plan.nodes:
        ranges = list(node.ranges)
        variables = index_vars("i", len(ranges))
        exprs = [e for idx in node.reads.values() for e in idx] + [node.write_index()]
        sizes, rewrite = merge_loops(ranges, exprs, variables)
        if len(sizes) != 2:
            return None
        if shape is not None and tuple(sizes) != shape:
            return None
        shape = (sizes[0], sizes[1])
        c0, c1 = index_vars("c", 2)
        named = [(name, e) for name, idx in node.reads.items() for e in idx]
        named.append((node.name, node.write_index()))
        for name, e in named:
            e2 = rewrite(e, [c0, c1])
            s0, s1 = linear_stride(e2, c0), linear_stride(e2, c1)
            if s1 == 1:
                inner = inner or name
            elif s0 == 1 and s1 is not None and s1 != 0:  # a 2-D walk, down the columns
                outer = outer or name
    if shape is None or inner is None or outer is None:
        return None
    y, x = shape
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
    if plan.kind != "pointwise":
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
    """A pointwise kernel walks its iteration space in this order of dims (outermost
    first) instead of the logical one: the memory order of the buffer it stores, when that
    is a permutation (NHWC written for a cuDNN convolution), so that neighbouring threads
    write, and read from same-layout inputs, neighbouring elements."""

    size: tuple[int, ...]
    dims: tuple[int, ...]
    reason: str


def memory_order(plan: KernelPlan) -> Order | None:
    if plan.kind != "pointwise" or not plan.stores:
        return None
    lay = plan.buffers[plan.stores[0]].layout
    size, stride = tuple(lay.size), tuple(lay.stride)
    dims = tuple(sorted(range(len(size)), key=lambda k: (-stride[k], k)))
    real = [k for k in dims if size[k] != 1]
    if real == sorted(real) or not any(tuple(n.ranges) == size for n in plan.nodes):
        return None
    return Order(size, dims, f"iterates in the memory order of {plan.stores[0]} "
                             f"(dims {', '.join(map(str, dims))}, outermost first)")
