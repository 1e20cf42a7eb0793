"""One build of each C++ kernel body: a kernel that differs from an earlier one only in its
name and comments (a repeated layer) becomes a one-line forwarder to it, so the library
still exports every name. `forwarded_to` tells cpp/asm.py whose machine code it runs.
"""

from __future__ import annotations

import re

from kernelscope.compiler.codegen.backend import GeneratedKernel

NOTE = "// the same kernel as"
_FORWARDER = re.compile(r'^extern "C" void (\w+)\(.*\{ (\w+)\(.*\}\s*' + re.escape(NOTE))


def body_key(kernel: GeneratedKernel) -> str:
    """The kernel's source without its name and with every comment line blanked (they name
    the buffers, FX nodes and lines it came from); the lines keep their places, so two
    kernels with one key also have one line table."""
    return "\n".join("//" if line.lstrip().startswith("//") else line
                     for line in kernel.source.replace(kernel.name, "KERNEL").splitlines())


def library_kernels(kernels: list[GeneratedKernel]) -> str:
    """The kernels as the library's source has them: each body once, the rest forwarders."""
    first: dict[str, str] = {}
    parts = []
    for k in kernels:
        same = first.setdefault(body_key(k), k.name)
        line = _forwarder(k, same) if same != k.name else None
        parts.append(k.source if line is None else line)
    return "\n".join(parts)


def _forwarder(kernel: GeneratedKernel, target: str) -> str | None:
    """`extern "C" void k7(const float* in_ptr0, ...) { k3(in_ptr0, ...); }` (None when
    the kernel's signature is not one line this can read: it is then built as it is)."""
    opening = f'extern "C" void {kernel.name}('
    head = next((ln for ln in kernel.source.splitlines() if ln.startswith(opening)), None)
    if head is None or not head.rstrip().endswith(")"):
        return None
    params = head.rstrip()[len(opening):-1]
    names = [p.split()[-1].lstrip("*&") for p in params.split(",") if p.strip()]
    if any(not n.isidentifier() for n in names):
        return None
    return f"{head.rstrip()} {{ {target}({', '.join(names)}); }}  {NOTE} {target}: built once"


def forwarded_to(source: str, kernel: str) -> str | None:
    """The kernel a forwarder in the library's `source` calls (None: `kernel` is built)."""
    opening = f'extern "C" void {kernel}('
    for line in source.splitlines():
        if line.startswith(opening):
            m = _FORWARDER.match(line)
            return m.group(2) if m else None
    return None
