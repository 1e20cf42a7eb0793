"""Triton's real frontend on generated kernels, offline: no GPU and no interpreter.

The interpreter runs a kernel's Python, so it accepts code the compiler refuses (a
scalar pointer with a block mask, `1.0 / 0.0` folded as Python) and refuses code the
compiler accepts. `frontend_errors(fn, args)` lowers fn's graphs for CUDA with the
Triton backend, then builds each kernel with `triton.compile` for an sm_90 target
(TTIR..PTX need no device), and returns one `kernel: error` line per kernel that fails.
Run it in a process without TRITON_INTERPRET (the kernels must be JIT functions):
`python triton_frontend.py` prints `name result` per case of `FRONTEND_CASES`.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

TL_SIG = {torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16",
          torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32", torch.int16: "i16",
          torch.int8: "i8", torch.uint8: "u8", torch.bool: "i1"}


def _kernels_for_cuda(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    """(GraphWork, GeneratedKernel) for every kernel of fn's graphs, generated for CUDA."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from kernelscope.compiler import compile_fx as cfx
    from kernelscope.compiler.capture.decompositions import decomposition_table
    from kernelscope.compiler.codegen.backends import choose_backend
    from kernelscope.compiler.options import CompileOptions

    found: list[tuple[Any, Any]] = []
    options = CompileOptions(backend="triton")

    def fw(gm: Any, inputs: Any) -> Any:
        work = cfx.GraphWork(0, gm, list(inputs), options)
        cfx.lower(work)
        work.backend = backend = choose_backend("triton", "cuda", options)
        assert work.lowered is not None
        cfx.schedule_stage(work)
        cfx.memory_stage(work)
        assert work.sched is not None
        kernels = [backend.generate(s.plan, [s.plan.name]) for s in work.sched.steps
                   if s.plan is not None]
        found.extend((work, k) for k in kernels)
        return make_boxed_func(gm.forward)

    def capture(gm: Any, inputs: Any) -> Any:
        return aot_module_simplified(gm, inputs, fw_compiler=fw,
                                     decompositions=decomposition_table())

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=capture)(*args)
    return found


def _signature(work: Any, kernel: Any, jit: Any) -> tuple[dict[str, str], dict[str, int]]:
    sig: dict[str, str] = {}
    names = list(jit.arg_names)
    for name, buf in zip(names, kernel.args):
        sig[name] = "*" + TL_SIG[work.sched.buffers[buf].dtype]
    constexprs = {k: v for k, v in kernel.config.items() if k.endswith("BLOCK")}
    for name in names[len(kernel.args):]:
        sig[name] = "constexpr" if name in constexprs else "i32"
    return sig, constexprs


def frontend_errors(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[str]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    errors: list[str] = []
    target = GPUTarget("cuda", 90, 32)
    for work, k in _kernels_for_cuda(fn, args):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"{k.name}.py"
            # The module the wrapper would define it in: the backend's own prelude.
            path.write_text("\n".join(work.backend.wrapper_prelude([k], None)) + "\n")
            spec = importlib.util.spec_from_file_location(k.name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            jit = getattr(module, k.name)
            sig, constexprs = _signature(work, k, jit)
            try:
                triton.compile(ASTSource(jit, sig, constexprs), target=target,
                               options={"num_warps": k.config.get("num_warps", 4)})
            except Exception as e:  # noqa: BLE001 - reported per kernel
                first = next((ln for ln in str(e).splitlines() if "Error" in ln),
                             str(e).splitlines()[-1] if str(e) else type(e).__name__)
                errors.append(f"{k.name}: {type(e).__name__}: {first.strip()[:200]}")
    return errors


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from frontend_cases import FRONTEND_CASES

    for case, (f, make) in FRONTEND_CASES.items():
        if len(sys.argv) > 1 and case not in sys.argv[1:]:
            continue
        torch.manual_seed(0)
        try:
            errs = frontend_errors(f, make())
            result = "ok" if not errs else "; ".join(errs)
        except Exception as e:  # noqa: BLE001 - reported per case
            result = f"raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(f"{case} {result}", flush=True)
