"""Triton's own stages of a kernel that ran under the interpreter, compiled for a GPU
target on a host without one (the report triton/report.py makes, marked `gpu_target`).

A child process without the interpreter imports the wrapper file again (same lines, real
`JITFunction`s) and binds each kernel's first launch, described by `describe_launch`,
through the JIT's own binder for the target: the same specialization a GPU launch gets.
Nothing is run.

    python -m kernelscope.compiler.codegen.triton.offline < request.json > reports.json
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from kernelscope.compiler.codegen.backend import Launch
from kernelscope.compiler.codegen.triton.cache import CACHE_ENV
from kernelscope.compiler.codegen.triton.report import bundled_tool, kernel_report_of, run_tool
from kernelscope.compiler.devices import CUDA

TARGET_RE = re.compile(r"sm_(\d+)a?")
REG_RE = re.compile(r"\bREG:(\d+)")
CHILD_TIMEOUT_S = 300


class _Pointer:
    """What the JIT's binder reads from a tensor argument: its dtype and address (the
    CPU tensor's address keeps its alignment: a view's offset stays unaligned)."""

    def __init__(self, dtype: Any, address: int) -> None:
        self.dtype = dtype
        self._address = address

    def data_ptr(self) -> int:
        return self._address


def capability(target: str) -> int | None:
    """sm_90 -> 90; None for a name that is not an NVIDIA target."""
    m = TARGET_RE.fullmatch(target.strip())
    return int(m.group(1)) if m else None


def describe_launch(launch: Launch) -> dict[str, Any]:
    """A launch's arguments as JSON: a tensor as its dtype and address, a number as it is."""
    def arg(value: Any) -> Any:
        if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
            return {"dtype": str(value.dtype).removeprefix("torch."),
                    "address": int(value.data_ptr())}
        return value

    args, kwargs = launch
    return {"args": [arg(a) for a in args], "kwargs": dict(kwargs)}


def offline_cache_dir(wrapper: Path, target: str) -> Path:
    """Triton's cache for the wrapper's kernels compiled for `target`, one per wrapper."""
    return wrapper.parent / "triton_offline" / target / wrapper.stem


def offline_reports(wrapper: Path, launches: dict[str, Launch | None], target: str,
                    workers: int = 1) -> dict[str, dict[str, Any]]:
    """Each launched kernel's stages compiled for `target` ("sm_90"), in a child process;
    a kernel that cannot be has a `stages_note` saying why."""
    if capability(target) is None:
        note = f"gpu_target {target!r} is not an NVIDIA target (sm_NN)"
        return {name: {"stages_note": note} for name in launches}
    request = {"wrapper": str(wrapper), "target": target, "workers": workers,
               "kernels": {name: describe_launch(launch)
                           for name, launch in launches.items() if launch is not None}}
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env[CACHE_ENV] = str(offline_cache_dir(wrapper, target))
    root = str(Path(__file__).resolve().parents[3])  # the child imports this same package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    why = "no output"
    try:
        proc = subprocess.run([sys.executable, "-m", "kernelscope.compiler.codegen.triton.offline"],
                              input=json.dumps(request), capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S, env=env, check=False)
        reports: dict[str, dict[str, Any]] = json.loads(proc.stdout) if proc.stdout else {}
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        reports, why = {}, f"{type(e).__name__}: {e}"
    else:
        if proc.stderr.strip():
            why = proc.stderr.strip().splitlines()[-1]
    out: dict[str, dict[str, Any]] = {}
    for name, launch in launches.items():
        if launch is None:
            out[name] = {"stages_note": "never launched: nothing to compile"}
        else:
            out[name] = reports.get(name) or {
                "stages_note": f"compiling for {target} failed: {why}"}
    return out


def compile_kernels(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The child's side: each kernel of the request compiled for its target."""
    target = str(request["target"])
    cap = capability(target)
    assert cap is not None
    module = _jit_module(Path(request["wrapper"]))
    kernels: dict[str, Any] = request["kernels"]
    # ptxas, nvdisasm and cuobjdump are subprocesses: the kernels' builds overlap.
    with ThreadPoolExecutor(max_workers=max(1, int(request.get("workers", 1)))) as pool:
        reports = pool.map(lambda kv: _report(module, kv[0], kv[1], target, cap), kernels.items())
        return dict(zip(kernels, reports, strict=True))


def _report(module: ModuleType, name: str, launch: dict[str, Any], target: str, cap: int
            ) -> dict[str, Any]:
    try:
        compiled, fn = _compile(getattr(module, name), launch, cap)
    except Exception as e:  # the offline compile only adds views; the kernel ran
        return {"stages_note": f"compiling for {target} failed: {type(e).__name__}: {e}"}
    report = kernel_report_of(compiled, fn)
    for key in ("registers", "spills"):  # the driver's numbers: not known offline
        report.pop(key, None)
    cubin = compiled.asm.get("cubin")
    if isinstance(cubin, bytes) and (regs := registers(cubin)) is not None:
        report["registers"] = regs
    return {**report, "gpu_target": target}


def _compile(fn: Any, launch: dict[str, Any], cap: int) -> tuple[Any, Any]:
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.runtime.jit import create_function_from_signature

    def arg(value: Any) -> Any:
        if isinstance(value, dict):
            return _Pointer(getattr(torch, value["dtype"]), int(value["address"]))
        return value

    target = GPUTarget(CUDA, cap, 32)  # Triton names its CUDA backend as we name the device
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    kw = {"debug": bool(fn.debug), **launch["kwargs"]}
    bound, specialization, options = binder(*[arg(a) for a in launch["args"]], **kw)
    options, signature, constexprs, attrs = fn._pack_args(backend, kw, bound, specialization,
                                                          options)
    compiled = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                              options=options.__dict__)
    return compiled, fn


def _jit_module(wrapper: Path) -> ModuleType:
    """The wrapper file imported under its own module name (the child runs without the
    interpreter, so its kernels are JITFunctions)."""
    spec = importlib.util.spec_from_file_location(f"{wrapper.stem}_offline", wrapper)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {wrapper}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def registers(cubin: bytes) -> int | None:
    """Registers per thread as ptxas allotted them (`cuobjdump -res-usage`)."""
    tool = bundled_tool("cuobjdump")
    if tool is None:
        return None
    m = REG_RE.search(run_tool(tool, ["-res-usage"], cubin))
    return int(m.group(1)) if m else None


if __name__ == "__main__":
    json.dump(compile_kernels(json.load(sys.stdin)), sys.stdout)
