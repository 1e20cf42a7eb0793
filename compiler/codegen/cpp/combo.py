"""A C++ combo kernel: independent pointwise kernels as one function.

Each part is a `static` function over [start, end) of its outer loop; the combo is one
OpenMP loop over every part's blocks, so the group starts threads once:

    #pragma omp parallel for schedule(dynamic)
    for (int64_t block = 0; block < 7; block++)
    {
        if (block < 4) { combo_part0(in_ptr0, out_ptr0, block * 16384, ...); }
        else if ...
    }
"""

from __future__ import annotations

import dataclasses

from kernelscope.compiler.codegen.common import Lines
from kernelscope.compiler.codegen.cpp.ops import pointer_params
from kernelscope.compiler.codegen.kernel import part_header
from kernelscope.compiler.schedule.plan import ComboPlan

BLOCK = 16384  # elements of one part that one iteration of the combo's loop computes


def combo_lines(plan: ComboPlan, header: list[str], parallel_min: int, codegen: type,
                index_checks: bool = False) -> Lines:
    """`codegen`: CppKernelCodegen, whose `span` parts this combines."""
    out = Lines()
    names = plan.arg_names()
    calls: list[tuple[int, int, int, str, str]] = []  # blocks, block, outer, helper, args
    for i, part in enumerate(plan.parts):
        helper = dataclasses.replace(part, name=f"{plan.name}_part{i}")
        gen = codegen(helper, index_checks)
        gen.span = True
        out.extend(gen.generate(part_header(part, i)))
        out.write("")
        outer, per = (part.xnumel, BLOCK) if gen.rows is None else \
            (gen.rows[0], max(1, BLOCK // gen.rows[1]))
        args = ", ".join(names[b] for b in helper.inputs + helper.stores)
        calls.append((-(-outer // per), per, outer, helper.name, args))
    with out.braced(f'extern "C" void {plan.name}({", ".join(pointer_params(plan, names))})'):
        for h in header:
            out.write(f"// {h}")
        _dispatch(out, calls, plan.xnumel >= parallel_min)
    return out


def _dispatch(out: Lines, calls: list[tuple[int, int, int, str, str]], parallel: bool) -> None:
    total = sum(c[0] for c in calls)
    if parallel:
        out.write("#pragma omp parallel for schedule(dynamic)")
    start = 0
    with out.braced(f"for (int64_t block = 0; block < {total}; block++)"):
        for i, (blocks, per, outer, helper, args) in enumerate(calls):
            end = start + blocks
            keyword = "if" if i == 0 else "else if"
            first = f"(block - {start}) * {per}" if start else f"block * {per}"
            with out.braced(f"{keyword} (block < {end})"):
                out.write(f"const int64_t first = {first};")
                out.write(f"{helper}({args}, first, std::min<int64_t>(first + {per}, "
                          f"{outer}));")
            start = end
