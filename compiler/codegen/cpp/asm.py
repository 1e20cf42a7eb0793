"""The machine code of a C++ kernel as g++ built it: `objdump -d -l` of the graph's library,
cut to the kernel's own function and the OpenMP regions outlined from it, with which
kernel source lines each instruction comes from. Read by `CppBackend.kernel_report`.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen.cpp.dedup import forwarded_to
from kernelscope.compiler.codegen.debuglines import KernelFile, kernel_file, objdump_lines, spans


def asm_report(lib: str, kernel: str) -> dict[str, Any]:
    """`ir.asm` (the kernel's assembly) and `line_maps.asm`; empty without objdump."""
    if not os.path.exists(lib):
        return {}
    stat = os.stat(lib)
    source = Path(lib).with_suffix(".cpp")
    kernel = _built_as(source, kernel)
    text = _kernel_asm(_disassembly(lib, stat.st_mtime_ns), kernel)
    if not text:
        return {}
    kf = _kernel_file(source, kernel)
    if kf is None:
        return {"ir": {"asm": objdump_lines(text, KernelFile("", 0, 0))[0]}}
    text, lines = objdump_lines(text, kf)
    return {"ir": {"asm": text}, "line_maps": {"asm": spans(lines)}}


ASM_LIMIT = 1 << 16  # characters of one kernel's assembly kept in the event


@functools.lru_cache(maxsize=16)
def _disassembly(lib: str, mtime_ns: int) -> str:
    """`objdump -d` of a built library, once per library (mtime_ns keys a rebuild)."""
    try:
        for lines in (["-l", "--inlines"], ["-l"]):  # --inlines: binutils 2.30 and later
            proc = subprocess.run(["objdump", "-d", *lines, "--no-show-raw-insn", "-C", lib],
                                  capture_output=True, text=True, timeout=30)
            if proc.returncode == 0:
                return proc.stdout
    except (OSError, subprocess.TimeoutExpired):
        pass
    return ""


def _built_as(source: Path, kernel: str) -> str:
    """The kernel whose machine code `kernel` runs: itself, or the kernel with the same
    body that the library built once (cpp/dedup.py), whose lines are `kernel`'s too."""
    try:
        return forwarded_to(source.read_text(), kernel) or kernel
    except OSError:
        return kernel


def _kernel_file(source: Path, kernel: str) -> KernelFile | None:
    """Where `kernel` sits in the library's source (its `extern "C"` line is line 1)."""
    try:
        text = source.read_text()
    except OSError:
        return None
    opening = f'extern "C" void {kernel}('
    # "*.cpp": the shared cache's rebuild compiles the same text under another name.
    kf = kernel_file("*.cpp", text, opening, 0)
    if kf is None:
        return None
    rest = text.splitlines()[kf.first:]
    count = 1 + next((i for i, t in enumerate(rest) if t.startswith('extern "C" ')), len(rest))
    return KernelFile(kf.name, kf.first, count)


def _kernel_asm(disassembly: str, kernel: str) -> str:
    """The functions of `kernel` (`kernel`, `kernel._omp_fn.0`, ...) cut out of objdump's text."""
    parts = re.split(r"\n(?=[0-9a-f]+ <)", disassembly)
    parts = [re.sub(r"\n\s*Disassembly of section .*$", "", p, flags=re.S) for p in parts]
    mine = [p.strip() for p in parts
            if (m := re.match(r"[0-9a-f]+ <([^>]+)>:", p)) and
            (m.group(1) == kernel or m.group(1).startswith(kernel + "."))]
    text = "\n\n".join(mine)
    if len(text) > ASM_LIMIT:
        text = text[:ASM_LIMIT] + f"\n... ({len(text) - ASM_LIMIT} more characters)"
    return text + "\n" if text else ""
