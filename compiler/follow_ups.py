"""Which stages come after a compile's own result (docs/events.md, "Follow-ups"): asked by the
pipeline, which runs them after `done`, and by the server, which waits for them. Torch-free.

In: the compile options. Out: the follow-up stages' names, in the order they run.
"""

from __future__ import annotations

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.options import CompileOptions


def follow_ups(options: CompileOptions) -> list[str]:
    """`inductor` when asked for; `gpu_stages` where Triton runs under its interpreter here
    and a gpu_target is set (compiling its kernels for that GPU offline takes seconds, so it
    never holds back `done`)."""
    out = ["inductor"] if options.inductor else []
    try:
        emulated = targets.resolve(options.backend, options.device).emulated_on(options.device)
    except ValueError:
        emulated = False
    return out + (["gpu_stages"] if emulated and options.gpu_target else [])
