"""The Triton codegen's measured rules: block sizes, warps and the shape of the code. Each
was chosen by `python -m benchmarks.sweep` (numbers: docs/perf.md, "Why the Triton rules
are what they are"); every alternative computes the same, only slower.
"""

from __future__ import annotations

from typing import Any

from kernelscope.compiler.codegen.common import next_power_of_2
from kernelscope.compiler.schedule.plan import KernelPlan

# Pointwise: 16 elements per thread on large tensors amortise each program's setup.
POINTWISE_WARPS = {4096: 8, 2048: 4}  # XBLOCK -> warps; smaller blocks: 4 warps at most
MIN_PROGRAMS = 1024  # a large pointwise block only while the grid keeps this many programs
# A pointwise kernel reading more values than this per element (a max-pool window chain)
# keeps 8 elements a thread: every read is a live register per element, and at 16 such
# a chain runs out of registers.
HEAVY_READS = 16
# Looped reductions: one row per program, 4096 elements per step, 16 warps: long rows are
# read in wide, contiguous steps, and few rows still give one program each.
LOOPED_RBLOCK, LOOPED_WARPS = 4096, 16

# One step of the looped logsumexp, per lane: m the running max ({a}) from "init", s the
# sum of exp(v - m) ({a}_sum), {a}_v the new element (-inf where masked). "two_exp"
# rescales s and adds exp(v - m_new); the "one" steps use exp(0) = 1 for one of the two;
# "diff" starts m finite, so v - m needs no -inf guard; "*2": exp2 of v * log2(e). All
# keep s = 0 for only -inf and give NaN where eager's softmax does.
_ONE = "tl.where({a}_v > {a}, {a}_sum * {a}_e + 1.0, {a}_sum + {a}_e)"
LSE_STEPS: dict[str, dict[str, Any]] = {
    "two_exp": {"init": "-inf", "lines": (
        "{a}_new = tl.maximum({a}, {a}_v, tl.PropagateNan.ALL)",
        "{a}_sum = tl.where({a}_new == float('-inf'), 0.0, {a}_sum * tl.exp({a} - {a}_new) "
        "+ tl.exp({a}_v - {a}_new))",
        "{a} = {a}_new")},
    "two_exp2": {"init": "-inf", "lines": (
        "{a}_new = tl.maximum({a}, {a}_v, tl.PropagateNan.ALL)",
        "{a}_sum = tl.where({a}_new == float('-inf'), 0.0, {a}_sum * tl.exp2(({a} - {a}_new) "
        "* 1.4426950408889634) + tl.exp2(({a}_v - {a}_new) * 1.4426950408889634))",
        "{a} = {a}_new")},
    "one_exp": {"init": "-inf", "lines": (
        "{a}_new = tl.maximum({a}, {a}_v, tl.PropagateNan.ALL)",
        "{a}_e = tl.exp(tl.minimum({a}, {a}_v) - {a}_new)",
        "{a}_sum = tl.where({a}_new == float('-inf'), 0.0, " + _ONE + ")",
        "{a} = {a}_new")},
    "one_exp2": {"init": "-inf", "lines": (
        "{a}_new = tl.maximum({a}, {a}_v, tl.PropagateNan.ALL)",
        "{a}_e = tl.exp2((tl.minimum({a}, {a}_v) - {a}_new) * 1.4426950408889634)",
        "{a}_sum = tl.where({a}_new == float('-inf'), 0.0, " + _ONE + ")",
        "{a} = {a}_new")},
    "diff_exp2": {"init": "lowest", "lines": (
        "{a}_d = {a}_v - {a}",
        "{a}_e = tl.exp2(tl.abs({a}_d) * -1.4426950408889634)",
        "{a}_sum = tl.where({a}_d > 0, {a}_sum * {a}_e + 1.0, {a}_sum + {a}_e)",
        "{a} = tl.maximum({a}, {a}_v, tl.PropagateNan.ALL)")},
}
# diff_exp2 has the fewest instructions, but needs more registers than two_exp: grids
# that fit in one wave at 4 programs per SM (FEW_ROWS) keep two_exp.
LSE_STEP = "diff_exp2"
LSE_STEP_FEW_ROWS = "two_exp"
FEW_ROWS = 4 * 132  # programs of 16 warps at <= 32 registers: 4 per SM, 132 SMs (H200)


def lse_step(programs: int) -> dict[str, Any]:
    """The logsumexp step of a looped reduction run as `programs` programs."""
    return LSE_STEPS[LSE_STEP_FEW_ROWS if programs <= FEW_ROWS else LSE_STEP]


# Masks are constants where the blocks tile the numels exactly: Triton drops them.
# (No cache hints, backwards loops or pipelined `tl.range`: none was faster, docs/perf.md.)
FULL_BLOCK_MASKS = True


def full_blocks(plan: KernelPlan, cfg: dict[str, Any]) -> tuple[bool, bool]:
    """(x, r): whether cfg's XBLOCK tiles xnumel and its RBLOCK rnumel exactly."""
    if not FULL_BLOCK_MASKS:
        return False, False
    x = plan.xnumel % cfg["XBLOCK"] == 0
    return x, plan.kind.reduces and plan.rnumel % cfg["RBLOCK"] == 0


def block_config(plan: KernelPlan, persistent_limit: int) -> dict[str, Any]:
    """Block sizes and warps of pointwise kernels and row reductions."""
    if not plan.kind.reduces:
        reads = sum(len(idx) for n in plan.nodes for idx in n.reads.values())
        xblock = min(4096 if reads <= HEAVY_READS else 1024, next_power_of_2(plan.xnumel))
        while xblock > 1024 and plan.xnumel // xblock < MIN_PROGRAMS:
            xblock //= 2
        warps = POINTWISE_WARPS.get(xblock, max(1, min(4, xblock // 256)))
        return {"persistent": True, "XBLOCK": xblock, "RBLOCK": 1, "num_warps": warps,
                "grid": (-(-plan.xnumel // xblock),)}
    rnumel = plan.rnumel
    if rnumel <= persistent_limit:
        rblock = next_power_of_2(rnumel)
        xblock = max(1, min(next_power_of_2(plan.xnumel), max(1, 2048 // rblock)))
        warps = max(1, min(8, (xblock * rblock) // 256))
        return {"persistent": True, "XBLOCK": xblock, "RBLOCK": rblock, "num_warps": warps,
                "grid": (-(-plan.xnumel // xblock),)}
    rblock = min(LOOPED_RBLOCK, next_power_of_2(rnumel))
    warps = max(1, min(LOOPED_WARPS, rblock // 256))
    return {"persistent": False, "XBLOCK": 1, "RBLOCK": rblock, "num_warps": warps,
            "grid": (plan.xnumel,)}


def column_config(plan: KernelPlan) -> dict[str, Any]:
    """Column reductions (x.sum(0)): 16 outputs by 256 rows per step (the fastest tile
    measured), fewer outputs where SMs would idle, more where rows are short."""
    xblock = 16
    while xblock > 4 and plan.xnumel // xblock < 132:
        xblock //= 2
    rblock = COLUMN_TILE // xblock
    short = next_power_of_2(plan.rnumel)
    if short < rblock:
        rblock = short
        xblock = max(1, min(COLUMN_MAX_X, next_power_of_2(plan.xnumel), COLUMN_TILE // rblock))
    warps = max(1, min(8, xblock * rblock // 256))
    # one step covers the rows: the whole column block in registers, no loop
    return {"persistent": plan.rnumel <= rblock, "XBLOCK": xblock, "RBLOCK": rblock,
            "num_warps": warps, "grid": (-(-plan.xnumel // xblock),)}


COLUMN_TILE = 4096  # elements per step of a column reduction
COLUMN_MAX_X = 128  # outputs per program of a column reduction over short rows
