"""Software prefetch of the next row in C++ reduction kernels that loop over each row more
than once (softmax, layer norm): the hardware prefetcher stops at every 4 KB page, so each
row of a page or two starts with misses that the row's first loop waits for, and the
output's lines are fetched for writing by the stores that need them.

The second loop over the row is run in chunks of PREFETCH_CHUNK elements; before each chunk
the matching lines of the next row are prefetched: what the first loop reads, and every
output element a loop writes at (xindex, rindex). The fetch then overlaps the second loop's
work (softmax's exp), a few lines at a time: a burst of a whole row's prefetches waits for
the core's line-fill buffers (measured in docs/perf.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy
import torch

from kernelscope.compiler.codegen.common import RINDEX, XINDEX, Lines
from kernelscope.compiler.ir.index_print import cexpr

PREFETCH_ROW_MAX = 8192  # bytes of the widest prefetched row; longer rows are left alone
PREFETCH_CHUNK = 128  # elements of the second loop between two rounds of prefetches
LINE = 64


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
                  simd: str | None, r_loop: Callable[[str, str], None]) -> None:
    """The loop over the row in chunks, each after its lines of the next row are
    prefetched (`r_loop(start, end)` writes the loop itself)."""
    ch = PREFETCH_CHUNK
    out.write(f"for (int64_t rchunk = 0; rchunk < {rnumel}; rchunk += {ch})")
    out.write("{")
    with out.indent():
        out.write(f"const int64_t rend = std::min<int64_t>(rchunk + {ch}, {rnumel});")
        for a in accesses:
            at = cexpr(a.index.xreplace({XINDEX: XINDEX + 1, RINDEX: sympy.Symbol("rp")}))
            out.write(f"if (xindex + 1 < {xnumel}) for (int64_t rp = rchunk; rp < rend; "
                      f"rp += {LINE // a.dtype.itemsize}) "
                      f"__builtin_prefetch(&{a.arg}[{at}]{', 1' if a.write else ''});")
        if simd:
            out.write(simd)
        r_loop("rchunk", "rend")
    out.write("}")
