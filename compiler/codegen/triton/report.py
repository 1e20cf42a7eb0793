"""What Triton's build of one kernel reports, for the compile event.

In: a `@triton.jit` function after its first launch on a GPU. Out: registers, spills,
shared memory, warps, stages; Triton's stages as text (SASS where `nvdisasm` is found)
with their line maps (codegen/debuglines.py).
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen.debuglines import (
    KernelFile,
    ptx_lines,
    sass_lines,
    spans,
    triton_line_maps,
)

IR_STAGE_LIMIT = 1 << 16  # characters of one IR stage kept in the event
TOOL_TIMEOUT_S = 30


def compiled_report(fn: Any) -> dict[str, Any]:
    """Registers, spills, shared memory, launch config, IR stages and their line maps of
    a JIT function's compiled kernel (the last one compiled: the warmup's launch)."""
    compiled = None
    for cache in getattr(fn, "device_caches", {}).values():
        kernels = cache[0] if isinstance(cache, tuple) else cache
        if kernels:
            compiled = list(kernels.values())[-1]
    return kernel_report_of(compiled, fn) if compiled is not None else {}


def kernel_report_of(compiled: Any, fn: Any) -> dict[str, Any]:
    """The report of one CompiledKernel of `fn` (a GPU's build, or one made offline for a
    GPU target: compiler/codegen/triton/offline.py)."""
    report: dict[str, Any] = {}
    for key, attr in (("registers", "n_regs"), ("spills", "n_spills")):
        value = getattr(compiled, attr, None)
        if isinstance(value, int):
            report[key] = value
    metadata = getattr(compiled, "metadata", None)
    for key, attr in (("shared_bytes", "shared"), ("num_warps", "num_warps"),
                      ("num_stages", "num_stages")):
        value = getattr(metadata, attr, None)
        if isinstance(value, int):
            report[key] = value
    asm = getattr(compiled, "asm", {}) or {}
    stages = {k: v for k, v in asm.items() if isinstance(v, str)}
    kf = _kernel_file(fn)
    maps = triton_line_maps(stages, kf) if kf is not None else {}
    cubin = asm.get("cubin") if hasattr(asm, "get") else None
    if isinstance(cubin, bytes) and (listing := nvdisasm(cubin)):
        if kf is not None:
            callees = ptx_lines(stages.get("ptx", ""), kf)[1]
            stages["sass"], sass_map = sass_lines(listing, kf, callees)
            maps["sass"] = spans(sass_map)
        else:
            stages["sass"] = listing
    if stages:
        report["ir"] = {k: _capped(v) for k, v in stages.items()}
    if maps := {k: v for k, v in maps.items() if v}:
        report["line_maps"] = maps
    return report


def _kernel_file(fn: Any) -> KernelFile | None:
    """Where the kernel's source (its `@triton.jit` line first) sits in its module file."""
    py = fn
    for _ in range(4):  # FastKernel -> JITFunction -> the Python function
        if hasattr(py, "__code__"):
            break
        py = getattr(py, "fn", None)
    code = getattr(py, "__code__", None)
    if code is None:
        return None
    try:
        count = len(inspect.getsourcelines(py)[0])
    except (OSError, TypeError):
        return None
    return KernelFile(os.path.basename(code.co_filename), code.co_firstlineno, count)


def bundled_tool(name: str) -> str | None:
    """A CUDA tool (nvdisasm, cuobjdump) on PATH, else the copy Triton ships
    (triton/backends/nvidia/bin)."""
    found = shutil.which(name)
    if found:
        return found
    package = getattr(sys.modules.get("triton"), "__file__", None)
    if not package:
        return None
    bundled = Path(package).parent / "backends" / "nvidia" / "bin" / name
    return str(bundled) if bundled.is_file() and os.access(bundled, os.X_OK) else None


def run_tool(tool: str, flags: list[str], cubin: bytes) -> str:
    """The tool's output on the cubin (written to a temporary file); "" if it fails."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            proc = subprocess.run([tool, *flags, f.name], capture_output=True,
                                  text=True, timeout=TOOL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return proc.stdout if proc.returncode == 0 else ""


def nvdisasm(cubin: bytes) -> str:
    """The cubin's SASS with its line table (`nvdisasm -c -gi`); "" without the tool."""
    tool = bundled_tool("nvdisasm")
    return run_tool(tool, ["-c", "-gi"], cubin) if tool is not None else ""


def _capped(text: str) -> str:
    if len(text) <= IR_STAGE_LIMIT:
        return text
    return text[:IR_STAGE_LIMIT] + f"\n... ({len(text) - IR_STAGE_LIMIT} more characters)\n"
