"""Helpers shared by the compiler tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "samples").glob("*.py"))


def lower_fn(fn: Callable[..., Any], *args: Any, interpret: bool = False) -> Any:
    """Capture fn with our decompositions and lower each ATen graph (no codegen).

    Returns the (graph module, LoweredGraph) pairs; with interpret=True, returns fn's
    result computed by the reference interpreter over the lowered graphs instead.
    """
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from kernelscope.compiler.capture.decompositions import decomposition_table
    from kernelscope.compiler.lowering.graph import GraphLowering
    from kernelscope.compiler.runtime.interpret import interpret as run_ir

    lowered: list[Any] = []

    def fw(gm: Any, inputs: Any) -> Any:
        graph = GraphLowering(gm, inputs).run()
        lowered.append((gm, graph))
        if interpret:
            return make_boxed_func(lambda *real: run_ir(graph, list(real)))
        return make_boxed_func(gm.forward)

    def backend(gm: Any, inputs: Any) -> Any:
        return aot_module_simplified(gm, inputs, fw_compiler=fw,
                                     decompositions=decomposition_table())

    torch._dynamo.reset()
    with torch.no_grad():
        result = torch.compile(fn, backend=backend)(*args)
    return result if interpret else lowered


def compiled(fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
    from kernelscope.compiler import backend

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, options=options or None)


# Tolerances per dtype, as Inductor's check_model uses them: float64 and float32 compared
# closely; float16 / bfloat16 results are compared with the function run in float32 (its
# inputs upcast), rounded to the low dtype, at torch.testing's tolerances for that dtype.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {  # (atol, rtol)
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-5, 1e-3),
    torch.bfloat16: (1e-5, 1.6e-2),
}
LOW_PRECISION = (torch.float16, torch.bfloat16)


def _leaves(x: Any) -> list[Any]:
    import torch.utils._pytree as pytree

    return pytree.tree_leaves(x)


def reference(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
    """fn's eager outputs, and the outputs to compare against: for a low-precision output,
    fn run on float32 copies of the low-precision inputs, rounded back to the output's
    dtype; for any other output, the eager output itself."""
    def fresh(a: Any) -> Any:
        return a.clone() if isinstance(a, torch.Tensor) else a

    with torch.no_grad():
        eager = _leaves(fn(*[fresh(a) for a in args]))
        if not any(isinstance(e, torch.Tensor) and e.dtype in LOW_PRECISION for e in eager):
            return eager, eager
        up = [a.float() if isinstance(a, torch.Tensor) and a.dtype in LOW_PRECISION
              else fresh(a) for a in args]
        wide = _leaves(fn(*up))
    assert len(wide) == len(eager)
    ref = [w.to(e.dtype) if isinstance(e, torch.Tensor) and e.dtype in LOW_PRECISION else e
           for w, e in zip(wide, eager)]
    return eager, ref


def assert_same(got: Any, eager: list[Any], ref: list[Any] | None = None) -> None:
    """Outputs match eager: same count, type, dtype, device, shape; values at the dtype's
    tolerance against `ref` (see `reference`); integers and booleans exactly."""
    outs = _leaves(got)
    ref = eager if ref is None else ref
    assert len(outs) == len(eager), f"{len(outs)} outputs, eager has {len(eager)}"
    for i, (o, e, r) in enumerate(zip(outs, eager, ref)):
        where = f"output {i}"
        if not isinstance(e, torch.Tensor):
            assert o == e, f"{where}: {o!r} != {e!r}"
            continue
        assert isinstance(o, torch.Tensor), f"{where}: {type(o).__name__}, not a tensor"
        assert o.dtype == e.dtype, f"{where}: dtype {o.dtype} != {e.dtype}"
        assert o.device == e.device, f"{where}: device {o.device} != {e.device}"
        assert o.shape == e.shape, f"{where}: shape {tuple(o.shape)} != {tuple(e.shape)}"
        atol, rtol = TOLERANCES.get(e.dtype, (0.0, 0.0))
        torch.testing.assert_close(o, r, atol=atol, rtol=rtol, equal_nan=True,
                                   check_stride=False, msg=lambda m, w=where: f"{w}: {m}")


def check_compiled(fn: Callable[..., Any], args: tuple[Any, ...], **options: Any) -> None:
    """fn compiled with Kernelscope matches eager (outputs and mutated inputs)."""
    eager, ref = reference(fn, args)
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    expected_inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        fn(*expected_inputs)  # what eager leaves in the (mutated) inputs
        got = compiled(fn, **options)(*copies)
    assert_same(got, eager, ref)
    assert_same(copies, expected_inputs)


def run_case_script(script: Path, *args: str, env_extra: dict[str, str] | None = None,
                    timeout: int = 900) -> dict[str, str]:
    """Run a cases script (`python SCRIPT ARGS...` prints `name result` per case) in a
    subprocess, e.g. under the Triton interpreter, where an out-of-bounds access crashes
    the process instead of failing one case. Returns name -> result."""
    import os
    import subprocess
    import sys

    env = {**os.environ, **(env_extra or {}),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                          text=True, env=env, timeout=timeout)
    results = {}
    for line in proc.stdout.splitlines():
        name, _, result = line.partition(" ")
        results[name] = result
    assert results, proc.stderr[-3000:]
    return results


def interpreter_case_results(script: Path, *args: str, timeout: int = 900) -> dict[str, str]:
    """run_case_script under the Triton interpreter (TRITON_INTERPRET must be set before
    Triton is imported, so the cases run in a process of their own)."""
    return run_case_script(script, *args, env_extra={"TRITON_INTERPRET": "1"}, timeout=timeout)
