"""A C++ combo kernel: independent pointwise kernels as one function.

Each part is generated as it would be alone, as a `static` function over a range
[start, end) of its outer loop (its rows, or its flat elements); the combo function is
one OpenMP loop over every part's blocks, so small parts share the threads that one
large part would have had to itself, and the whole group starts threads once:

    #pragma omp parallel for schedule(dynamic)
    for (int64_t block = 0; block < 7; block++)
    {
        if (block < 4) { combo_part0(in_ptr0, out_ptr0, block * 16384, ...); }
        else if ...
    }

In: a ComboPlan (schedule/horizontal.py). Out: the kernel's lines (with every part's
lines' origins).
"""

from __future__ import annotations

import dataclasses

from kernelscope.compiler.codegen.common import Lines
from kernelscope.compiler.codegen.cpp.ops import C_TYPE
from kernelscope.compiler.codegen.kernel import part_header
from kernelscope.compiler.schedule.plan import ComboPlan

BLOCK = 16384  # elements of one part that one iteration of the combo's loop computes


def combo_lines(plan: ComboPlan, header: list[str], parallel_min: int, codegen: type,
                index_checks: bool = False) -> Lines:
    """`codegen`: the C++ kernel generator (CppKernelCodegen), whose `span` parts this
    combines."""
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
    params = [f"const {C_TYPE[plan.buffers[b].dtype]}* __restrict__ {names[b]}"
              for b in plan.inputs]
    params += [f"{C_TYPE[plan.buffers[b].dtype]}* __restrict__ {names[b]}"
               for b in plan.stores]
    out.write(f'extern "C" void {plan.name}({", ".join(params)})')
    out.write("{")
    with out.indent():
        for h in header:
            out.write(f"// {h}")
        _dispatch(out, calls, plan.xnumel >= parallel_min)
    out.write("}")
    return out


def _dispatch(out: Lines, calls: list[tuple[int, int, int, str, str]], parallel: bool) -> None:
    total = sum(c[0] for c in calls)
    if parallel:
        out.write("#pragma omp parallel for schedule(dynamic)")
    out.write(f"for (int64_t block = 0; block < {total}; block++)")
    out.write("{")
    start = 0
    with out.indent():
        for i, (blocks, per, outer, helper, args) in enumerate(calls):
            end = start + blocks
            keyword = "if" if i == 0 else "else if"
            first = f"(block - {start}) * {per}" if start else f"block * {per}"
            out.write(f"{keyword} (block < {end})")
            out.write("{")
            with out.indent():
                out.write(f"const int64_t first = {first};")
                out.write(f"{helper}({args}, first, std::min<int64_t>(first + {per}, "
                          f"{outer}));")
            out.write("}")
            start = end
    out.write("}")
