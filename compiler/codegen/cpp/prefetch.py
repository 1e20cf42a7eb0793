"""Software prefetch of the next row in C++ reduction kernels that loop over each row more
than once (softmax, layer norm): the hardware prefetcher stops at every 4 KB page.

The second loop runs in chunks of PREFETCH_CHUNK; before each, the matching lines of the
next row (the first loop's reads, every loop's writes) are prefetched, so the fetch
overlaps the work a few lines at a time (docs/perf.md). Its accumulators live in LANES
lanes combined pairwise after the row: faster and more accurate than an `omp simd`
reduction per chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy
import torch

from kernelscope.compiler.codegen.common import RINDEX, XINDEX, Lines
from kernelscope.compiler.codegen.cpp.columns import chunks
from kernelscope.compiler.ir.index_print import cexpr

PREFETCH_ROW_MAX = 8192  # bytes of the widest prefetched row; longer rows are left alone
PREFETCH_CHUNK = 128  # elements of the second loop between two rounds of prefetches
LINE = 64
LANES = 16  # accumulator lanes: a float AVX-512 vector


@dataclass(frozen=True)
class LaneAcc:
    """An accumulator of the chunked loop, kept in LANES lanes: its name and C type, its
    identity, and how two of its values combine (a C expression of two operands)."""

    name: str
    ctype: str
    init: str
    combine: Callable[[str, str], str]


@dataclass(frozen=True)
class Access:
    """A pointer and an index of xindex and rindex that a loop reads or writes."""

    arg: str
    index: sympy.Expr
    dtype: torch.dtype
    write: bool = False


def next_row(accesses: Sequence[Access], rnumel: int) -> list[Access]:
    """The accesses worth prefetching at the next row: contiguous along the row (one
    step of rindex is one element), of xindex and rindex only, rows at most
    PREFETCH_ROW_MAX bytes; each once."""
    out: list[Access] = []
    for a in dict.fromkeys(accesses):
        if rnumel * a.dtype.itemsize > PREFETCH_ROW_MAX or \
                not a.index.free_symbols <= {XINDEX, RINDEX} or \
                sympy.diff(a.index, RINDEX) != 1:
            continue
        out.append(a)
    return out


def write_chunked(out: Lines, accesses: Sequence[Access], xnumel: int, rnumel: int,
                  simd: str | None, accs: Sequence[LaneAcc],
                  r_loop: Callable[[str, str, list[str]], None]) -> None:
    """The loop over the row in chunks, each after prefetching its lines of the next row
    (`r_loop(start, end, refs)` writes the loop); accumulators go to lanes (_lane_groups)."""
    for acc in accs:
        out.write(f"{acc.ctype} {acc.name}_l[{LANES}];")
        out.write(f"for (int64_t l = 0; l < {LANES}; l++) {acc.name}_l[l] = {acc.init};")
    with chunks(out, "rchunk", "rend", rnumel, PREFETCH_CHUNK):
        for a in accesses:
            at = cexpr(a.index.xreplace({XINDEX: XINDEX + 1, RINDEX: sympy.Symbol("rp")}))
            out.write(f"if (xindex + 1 < {xnumel}) for (int64_t rp = rchunk; rp < rend; "
                      f"rp += {LINE // a.dtype.itemsize}) "
                      f"__builtin_prefetch(&{a.arg}[{at}]{', 1' if a.write else ''});")
        if not accs:
            if simd:
                out.write(simd)
            r_loop("rchunk", "rend", [])
        else:
            _lane_groups(out, rnumel, accs, r_loop)
    for acc in accs:
        pair = acc.combine(f"{acc.name}_l[l]", f"{acc.name}_l[l + w]")
        out.write(f"for (int64_t w = {LANES // 2}; w > 0; w /= 2) "
                  f"for (int64_t l = 0; l < w; l++) {acc.name}_l[l] = {pair};")
        out.write(f"{acc.name} = {acc.name}_l[0];")


def _lane_groups(out: Lines, rnumel: int, accs: Sequence[LaneAcc],
                 r_loop: Callable[[str, str, list[str]], None]) -> None:
    """A chunk as groups of LANES elements, each group one `omp simd` loop in which the
    accumulators are references to their lanes (the last group may be short)."""
    end = f"rv + {LANES}" if rnumel % LANES == 0 else f"std::min<int64_t>(rv + {LANES}, rend)"
    with out.braced(f"for (int64_t rv = rchunk; rv < rend; rv += {LANES})"):
        out.write("#pragma omp simd")
        r_loop("rv", end, [f"{a.ctype}& {a.name} = {a.name}_l[rindex - rv];" for a in accs])
