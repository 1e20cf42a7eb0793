"""A Triton combo kernel: independent pointwise kernels launched as one.

Each part is generated as alone, as a `@triton.jit` helper that takes its program id;
the combo kernel splits its program ids among the parts, as Inductor's do:

    pid = tl.program_id(0)
    if pid < 4:
        combo_part0(in_ptr0, out_ptr0, 4096, 1024, pid)
    elif pid < 5:
        combo_part1(in_ptr1, out_ptr1, 64, 64, pid - 4)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kernelscope.compiler.codegen.common import Line, Lines
from kernelscope.compiler.codegen.kernel import part_header
from kernelscope.compiler.codegen.triton.kernel import TritonKernel, generate_triton
from kernelscope.compiler.schedule.plan import ComboPlan


def generate_triton_combo(plan: ComboPlan, header: list[str], persistent_limit: int,
                          interpret: bool = False, index_checks: bool = False,
                          fused_casts: bool = False) -> TritonKernel:
    out = Lines()
    names = plan.arg_names()
    calls: list[tuple[int, str, str]] = []  # (programs, helper, its arguments)
    warps = 1
    for i, part in enumerate(plan.parts):
        helper = dataclasses.replace(part, name=f"{plan.name}_part{i}")
        k = generate_triton(helper, part_header(part, i), persistent_limit, interpret,
                            index_checks, part=True, fused_casts=fused_casts)
        _extend(out, k)
        out.write("")
        out.write("")
        args = [names[b] for b in k.args] + [str(n) for n in k.numels] + \
            [str(k.meta["XBLOCK"])]
        calls.append((k.grid[0], helper.name, ", ".join(args)))
        warps = max(warps, k.num_warps)
    out.write("@triton.jit(debug=True)" if index_checks else "@triton.jit")
    params = [names[b] for b in plan.inputs + plan.stores]
    out.write(f"def {plan.name}({', '.join(params)}):")
    total = _dispatch(out, header, calls)
    return TritonKernel(plan.name, out.text(), out.line_map(), (total,), {}, warps,
                        plan.inputs + plan.stores, [])


def _dispatch(out: Lines, header: list[str], calls: list[tuple[int, str, str]]) -> int:
    """The combo kernel's body: each part over its range of program ids; the total."""
    start = 0
    with out.indent():
        for h in header:
            out.write(f"# {h}")
        out.write("pid = tl.program_id(0)")
        for i, (programs, helper, args) in enumerate(calls):
            end = start + programs
            keyword = "if" if i == 0 else "elif"
            out.write(f"{keyword} pid < {end}:")
            with out.indent():
                pid = "pid" if start == 0 else f"pid - {start}"
                out.write(f"{helper}({args}, {pid})")
            start = end
    return start


def _extend(out: Lines, k: TritonKernel) -> None:
    """A generated kernel's lines, with the origins its line map gives them."""
    tags: dict[int, dict[str, Any]] = {e["line"]: e for e in k.line_map}
    for i, text in enumerate(k.source.rstrip("\n").split("\n"), 1):
        tag = tags.get(i)
        out.lines.append(Line(text, tuple(tag["origins"]) if tag else (),
                              tuple(tag["buffers"]) if tag else ()))
