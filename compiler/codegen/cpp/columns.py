"""C++ reductions across rows with contiguous outputs (`x.sum(0)`), interchanged: blocks
of outputs, each row one `omp simd` pass over a block into accumulator arrays. Rows add
in an order fixed by the shape, never the threads, so the bits do not depend on them;
float sums go through double totals, and long ones split the rows (`row_parts`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kernelscope.compiler.codegen.common import Lines

# Outputs per block at most; at run time one block per thread (ks_column_block), so a
# thread streams whole rows.
COLUMN_BLOCK = 2048
# Rows per block of a float sum before it joins a double total: as accurate as eager's
# cascade sum at ~5% of the kernel's time (docs/perf.md).
COLUMN_SUM_ROWS = 32


def lane_type(ctype: str) -> str:
    """The C type of an accumulator array: a flag (a max's any-NaN) in 32-bit lanes, as wide
    as a float's, or g++ does not vectorize the walk."""
    return "int32_t" if ctype == "bool" else ctype


@dataclass
class Columns:
    """What a column reduction's loop is made of: its sizes, its accumulators (name, C
    type, identity), the float sums among them, and the lines of its one loop block."""

    xnumel: int
    rnumel: int
    accs: list[tuple[str, str, str]]
    float_sums: list[str]
    index: Lines
    body: Lines
    post: Lines
    prologue: Lines
    totals: list[str] = field(default_factory=list)  # accs read back as `double {acc}_total`


@contextmanager
def chunks(out: Lines, var: str, end: str, total: int | str, step: int | str,
           start: int | str = 0) -> Iterator[None]:
    """A loop over [start, total) in chunks of `step`: `var` the chunk's start, `end` its
    end; the body is what the `with` block writes."""
    with out.braced(f"for (int64_t {var} = {start}; {var} < {total}; {var} += {step})"):
        out.write(f"const int64_t {end} = std::min<int64_t>({var} + {step}, {total});")
        yield


# Rows per part of a row-split column sum (each thread streams whole rows), and the most
# parts (longer parts beyond that).
ROW_PART = 128
MAX_ROW_PARTS = 64


def row_parts(c: Columns, parallel_min: int) -> tuple[int, int] | None:
    """(parts, rows per part) when a column reduction splits its rows across threads: only
    float sums (whose partials add in double), parallel sizes, and at least two parts."""
    xn, rn = c.xnumel, c.rnumel
    if xn * rn < parallel_min or rn < 2 * ROW_PART:
        return None
    if not c.float_sums or sorted(c.float_sums) != sorted(acc for acc, _, _ in c.accs):
        return None
    per = max(ROW_PART, -(-rn // MAX_ROW_PARTS))
    per = -(-per // COLUMN_SUM_ROWS) * COLUMN_SUM_ROWS
    return -(-rn // per), per


def column_body(c: Columns, parallel_min: int) -> Lines:
    """Blocks of up to COLUMN_BLOCK outputs (one per thread when there are at least
    `parallel_min` elements), each reducing every row into its accumulator arrays; sums
    over many rows split the rows into parts instead (`row_split_body`)."""
    split = row_parts(c, parallel_min)
    if split is not None:
        return row_split_body(c, *split)
    xn, rn = c.xnumel, c.rnumel
    cap = min(COLUMN_BLOCK, xn)
    xb: int | str = cap
    out = Lines()
    if xn * rn >= parallel_min:
        xb = "xb"
        out.write(f"const int64_t xb = ks_column_block({xn}, {cap});")
        out.write("#pragma omp parallel for")
    with chunks(out, "xblock", "xend", xn, xb):
        for acc, ctype, init in c.accs:
            out.write(f"{lane_type(ctype)} {acc}_v[{cap}];")
            out.write(f"for (int64_t i = 0; i < {xb}; i++) {acc}_v[i] = {init};")
        sums = c.float_sums if rn > COLUMN_SUM_ROWS else []
        for acc in sums:
            out.write(f"double {acc}_t[{cap}];")
            out.write(f"for (int64_t i = 0; i < {xb}; i++) {acc}_t[i] = 0;")
        if sums:
            _row_blocks(out, c, sums, 0, rn)
        else:
            _rows(out, c, "0", str(rn))
        _over_outputs(out, c, _results(c, sums, "t"), [c.post])
    return out


def row_split_body(c: Columns, parts: int, per: int) -> Lines:
    """Work items of (part of `per` rows, block of outputs) across the threads, each part's
    sums into its own slice of a double scratch array; then each output adds its parts in
    order. The bits depend on the shape only, not on the number of threads."""
    xn, rn = c.xnumel, c.rnumel
    cap = min(COLUMN_BLOCK, xn)
    blocks = -(-xn // cap)
    sums = [acc for acc, _, _ in c.accs]
    out = Lines()
    out.write(f"// rows in {parts} parts of {per}, each part's sums into a scratch slice, then "
              "each output adds its parts in order")
    for acc in sums:
        out.write(f"double* {acc}_p = static_cast<double*>(std::malloc(sizeof(double) * "
                  f"{parts * xn}));")
        out.write(f"if ({acc}_p == nullptr) std::abort();")
    out.write("#pragma omp parallel for")
    with out.braced(f"for (int64_t item = 0; item < {parts * blocks}; item++)"):
        out.write(f"const int64_t rpart = item / {blocks}, xblock = (item % {blocks}) * {cap};")
        out.write(f"const int64_t xend = std::min<int64_t>(xblock + {cap}, {xn});")
        out.write(f"const int64_t rstart = rpart * {per}, rstop = std::min<int64_t>(rstart + "
                  f"{per}, {rn});")
        for acc, ctype, init in c.accs:
            out.write(f"{lane_type(ctype)} {acc}_v[{cap}];")
            out.write(f"for (int64_t i = 0; i < {cap}; i++) {acc}_v[i] = {init};")
            out.write(f"double* {acc}_t = {acc}_p + rpart * {xn} + xblock;")
            out.write(f"for (int64_t i = 0; i < xend - xblock; i++) {acc}_t[i] = 0;")
        _row_blocks(out, c, sums, "rstart", "rstop")
    # Each block of outputs adds its parts in order, one `omp simd` pass per part (a loop
    # per output over the parts, stride xn, would be scalar).
    if xn >= 4096:
        out.write("#pragma omp parallel for")
    with chunks(out, "xblock", "xend", xn, cap):
        for acc in sums:
            out.write(f"double {acc}_s[{cap}];")
            out.write(f"for (int64_t i = 0; i < {cap}; i++) {acc}_s[i] = 0;")
        with out.braced(f"for (int64_t rpart = 0; rpart < {parts}; rpart++)"):
            _simd_over_block(out, [f"{acc}_s[i] += {acc}_p[rpart * {xn} + xblock + i];"
                                   for acc in sums])
        _over_outputs(out, c, _results(c, sums, "s"), [c.post])
    for acc in sums:
        out.write(f"std::free({acc}_p);")
    return out


def _results(c: Columns, wide: list[str], suffix: str) -> list[str]:
    """Each accumulator's value at its output: from its lane, or for the `wide` ones from
    their double total (`{acc}_{suffix}`), cast back; and a `{acc}_total` where read."""
    refs = []
    for acc, ctype, _ in c.accs:
        value = f"{acc}_{suffix if acc in wide else 'v'}[xindex - xblock]"
        cast = f"static_cast<{ctype}>({value})" if acc in wide else value
        refs.append(f"{ctype} {acc} = {cast};")
        if acc in c.totals:
            refs.append(f"double {acc}_total = {value};")
    return refs


def _row_blocks(out: Lines, c: Columns, sums: list[str], start: int | str,
                stop: int | str) -> None:
    """Rows start..stop in blocks of COLUMN_SUM_ROWS into the float lanes `{acc}_v`, each
    block's partial then added into the double totals `{acc}_t` of the float sums."""
    with chunks(out, "rblock", "rbend", stop, COLUMN_SUM_ROWS, start):
        _rows(out, c, "rblock", "rbend")
        _simd_over_block(out, [line for acc in sums
                               for line in (f"{acc}_t[i] += {acc}_v[i];", f"{acc}_v[i] = 0;")])


def _simd_over_block(out: Lines, body: list[str]) -> None:
    """One `omp simd` pass `i` over the block's outputs [xblock, xend)."""
    out.write("#pragma omp simd")
    with out.braced("for (int64_t i = 0; i < xend - xblock; i++)"):
        for line in body:
            out.write(line)


def _rows(out: Lines, c: Columns, start: str, end: str) -> None:
    """Rows start..end of a block, each one `omp simd` pass over the block's outputs."""
    with out.braced(f"for (int64_t rindex = {start}; rindex < {end}; rindex++)"):
        out.write("#pragma omp simd")
        _over_outputs(out, c, [f"{lane_type(ctype)}& {acc} = {acc}_v[xindex - xblock];"
                               for acc, ctype, _ in c.accs], [c.index, c.body])


def _over_outputs(out: Lines, c: Columns, refs: list[str], parts: list[Lines]) -> None:
    """One loop over a block's outputs: its accumulators, then `parts`."""
    with out.braced("for (int64_t xindex = xblock; xindex < xend; xindex++)"):
        for ref in refs:
            out.write(ref)
        out.extend(c.prologue)
        for part in parts:
            out.extend(part)
