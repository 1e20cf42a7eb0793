"""Which stages come after a compile's own result (docs/events.md, "Follow-ups"): asked by the
pipeline, which runs them after `done`, and by the server, which waits for them. Torch-free.

In: the compile options. Out: the follow-up stages' names, in the order they run.
"""

from __future__ import annotations

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.options import CompileOptions


def follow_ups(options: CompileOptions) -> list[str]:
    """`inductor` when asked for; `gpu_stages` where Triton's kernels have stages to report:
    on a GPU (nvdisasm's SASS of each kernel: most of a second), and where Triton runs
    under its interpreter here with a gpu_target set (compiling its kernels for that GPU
    offline: seconds). Neither holds back `done`."""
    out = ["inductor"] if options.inductor else []
    try:
        target = targets.resolve(options.backend, options.device)
    except ValueError:
        return out
    later = (target.emulated_on(options.device) and bool(options.gpu_target)) or \
        options.device in target.reports_after
    return out + (["gpu_stages"] if later else [])
