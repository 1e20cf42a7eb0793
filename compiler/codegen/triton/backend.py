"""The Triton backend (codegen/backend.py): on CUDA, or asked for on a CPU-only host, under
the Triton interpreter. Kernels come from triton/kernel.py and triton/template.py.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.codegen.backend import Backend, BuildResult, GeneratedKernel, Launch
from kernelscope.compiler.codegen.bessel import TRITON_BESSEL_CALL, TRITON_BESSEL_HELPERS
from kernelscope.compiler.codegen.mathops import INTERPRET_BF16_HELPER, TRITON_MATH_HELPERS
from kernelscope.compiler.codegen.optable import OpTable
from kernelscope.compiler.codegen.tiling import choose_tile, fits_grid, tile_config
from kernelscope.compiler.codegen.triton import launch as triton_launch
from kernelscope.compiler.codegen.triton.cache import graph_triton_cache
from kernelscope.compiler.codegen.triton.combo import generate_triton_combo
from kernelscope.compiler.codegen.triton.kernel import INTERPRET_OPS, OPS, generate_triton
from kernelscope.compiler.codegen.triton.offline import (
    offline_reports,
)
from kernelscope.compiler.codegen.triton.pool import PoolKernel, prebuild
from kernelscope.compiler.codegen.triton.report import compiled_report
from kernelscope.compiler.codegen.triton.template import (
    configs_for,
    generate_template,
    template_launch,
    template_node,
)
from kernelscope.compiler.features import Feature
from kernelscope.compiler.ir.template import TemplateConfig
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.plan import ComboPlan, KernelPlan

TRITON_IMPORTS = """import triton
import triton.language as tl
try:
    from triton.language.extra import libdevice
except ImportError:  # older Triton
    from triton.language.extra.cuda import libdevice


@triton.jit
def _prod(a, b):
    return a * b


@triton.jit
def _upow(base, exp):
    # Integer power by squaring (exp >= 0), wrapping as torch's does.
    b = base + exp * 0
    e = exp + base * 0
    result = b * 0 + 1
    for _ in range(64):
        result = tl.where((e & 1) != 0, result * b, result)
        e = e >> 1
        b = b * b
    return result


@triton.jit
def _ipow(base, exp):
    # A negative exponent follows torch's rule for integers: 1 for base 1, +-1 for base -1,
    # 0 for every other base.
    b = base + exp * 0
    e = exp + base * 0
    result = _upow(b, tl.where(e < 0, 0, e))
    unit = tl.where((e & 1) != 0, b, b * b)  # (-1) ** e, where b is -1
    small = tl.where(b == 1, b, tl.where(b == -1, unit, b * 0))
    return tl.where(e < 0, small, result)
""" + TRITON_MATH_HELPERS


class InterpreterUnavailable(RuntimeError):
    pass


def check_interpreter() -> None:
    """Triton takes on its interpreter when imported, so the process must have started
    with TRITON_INTERPRET=1 (targets.emulator_env); nothing here changes the environment."""
    import triton.language as tl

    if type(tl.sigmoid).__name__ != "InterpretedFunction":
        raise InterpreterUnavailable(
            "Triton kernels on the CPU run under the Triton interpreter, but Triton was "
            "imported without it: start the process with TRITON_INTERPRET=1 in its "
            "environment (the kernelscope command does so for --backend triton on a CPU)")


def _interpreter_asserts() -> None:
    """The interpreter runs `tl.device_assert` only in debug mode (it ignores `debug=True`)."""
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    if not builder.options.debug:
        builder.options = dataclasses.replace(builder.options, debug=True)


def kernel_body(kernel: GeneratedKernel) -> str:
    """A kernel's source without its name and its comment lines (which name the buffers,
    FX nodes and source lines it came from): two kernels with one body compute the same."""
    return "\n".join(line for line in kernel.source.replace(kernel.name, "KERNEL").splitlines()
                     if not line.lstrip().startswith("#"))


class TritonBackend(Backend):
    """Triton on CUDA; on a CPU-only host, when asked for, under the Triton interpreter."""

    target = targets.by_name("triton")
    # Not Feature.INLINE_SHARED: on an H100 the GPT-2 small step took 20.7 ms with
    # Inductor's realize rule against 18.7 ms storing shared values (docs/perf/training-steps.md).
    features = frozenset({Feature.SPLIT_REDUCTIONS, Feature.WRITES_OVER_INPUTS,
                          Feature.ONLINE_SOFTMAX, Feature.MATMUL_TEMPLATES,
                          Feature.RECOMPUTE_ONE_READ})

    def after_import(self, module: ModuleType, kernels: list[str]) -> None:
        if not self.emulated:  # the interpreter keeps the JIT path, which it implements
            triton_launch.install(module, kernels)

    def cache_identity(self) -> dict[str, str]:
        return {**super().cache_identity(),
                "interpret": os.environ.get("TRITON_INTERPRET", "")}

    def op_table(self) -> OpTable:
        return INTERPRET_OPS if self.emulated else OPS

    def kernel_prefix(self, kind: KernelKind, rnumel: int) -> str:
        if kind.reduces and rnumel <= self.options.persistent_rblock:
            return "triton_per"
        return super().kernel_prefix(kind, rnumel)

    def combo_refusal(self, plan: KernelPlan) -> str | None:
        tile = choose_tile(plan)
        if tile is not None and fits_grid(tile, tile_config(tile)["YBLOCK"]):
            return f"{plan.name} runs in 2-D tiles ({tile.reason}): it keeps its own launch"
        return None

    def template_configs(self, m: int, n: int, k: int, dtype: torch.dtype
                         ) -> list[TemplateConfig]:
        return configs_for(m, n, k)

    def template_kernel(self, plan: KernelPlan, header: list[str], config: TemplateConfig
                        ) -> GeneratedKernel:
        t = generate_template(plan, header, config, self.emulated)
        return GeneratedKernel(t.name, t.source, t.line_map, t.args,
                               template_launch(t, config.num_stages),
                               {"grid": list(t.grid), **config.to_json()})

    def generate(self, plan: KernelPlan, header: list[str]) -> GeneratedKernel:
        if self.options.low_precision not in ("round", "fused"):
            raise ValueError("low_precision must be round or fused, not "
                             f"{self.options.low_precision!r}")
        fused = self.options.low_precision == "fused"
        if plan.kind is KernelKind.TEMPLATE:
            config = template_node(plan).chosen
            assert config is not None, "a template plan without a chosen config"
            return self.template_kernel(plan, header, config)
        if isinstance(plan, ComboPlan):
            k = generate_triton_combo(plan, header, self.options.persistent_rblock,
                                      self.emulated, self.options.debug_index_asserts, fused)
        else:
            k = generate_triton(plan, header, self.options.persistent_rblock, self.emulated,
                                self.options.debug_index_asserts, fused_casts=fused)
        args = [*k.args, *map(str, k.numels), *(f"{m}={v}" for m, v in k.meta.items())]
        launch = f"{k.name}[{k.grid}]({', '.join(args)}, num_warps={k.num_warps})"
        return GeneratedKernel(k.name, k.source, k.line_map, k.args, launch,
                               {"grid": list(k.grid), **k.meta, "num_warps": k.num_warps,
                                "numels": list(k.numels)})

    def prebuild(self, module: ModuleType, kernels: list[GeneratedKernel],
                 dtypes: dict[str, torch.dtype], workers: int) -> dict[str, Any]:
        if self.emulated:  # the interpreter builds nothing
            return {}
        launches = [PoolKernel(k.name, [("ptr", dtypes[a]) for a in k.args]
                               + [("int", n) for n in k.config.get("numels", [])],
                               tuple(k.config["grid"]),
                               {m: v for m, v in k.config.items() if m not in ("grid", "numels")})
                    for k in kernels]
        return prebuild(module, launches, workers or self.options.workers())

    def wrapper_prelude(self, kernels: list[GeneratedKernel], artifact: Path | None
                        ) -> list[str]:
        # A kernel whose body is another's is that kernel under its own name (built once).
        lines = TRITON_IMPORTS.splitlines()
        if any("_ks_bf16(" in k.source for k in kernels):
            lines += INTERPRET_BF16_HELPER.splitlines()
        if any(TRITON_BESSEL_CALL in k.source for k in kernels):
            lines += TRITON_BESSEL_HELPERS.splitlines()
        first: dict[str, str] = {}
        for k in kernels:
            same = first.setdefault(kernel_body(k), k.name)
            if same != k.name:
                lines += ["", f"{k.name} = {same}  # the same kernel as {same}: compiled once"]
            else:
                lines += ["", "", *k.source.rstrip().splitlines()]
        return lines

    def launch_facts(self, aligned: dict[str, tuple[int, ...]]) -> list[str]:
        # codegen/triton/launch.py: these arguments are never checked for alignment
        lines = ["", "# Arguments each kernel gets from the wrapper's own allocations (16-byte",
                 "# aligned: the launch path checks only the others, per launch).",
                 "ALIGNED = {"]
        lines += [f"    {name!r}: {positions!r}," for name, positions in aligned.items()]
        return [*lines, "}"]

    def build(self, source_path: Path | None) -> BuildResult:
        if self.emulated:
            check_interpreter()
            if self.options.debug_index_asserts:
                _interpreter_asserts()
        return BuildResult(None, True, 0.0)

    def first_launch(self, wrapper: Path, inputs: list[dict[str, Any]] | None
                     ) -> AbstractContextManager[object]:
        # The interpreter has no cache; on a GPU Triton's is shared per wrapper.
        return nullcontext() if self.emulated else graph_triton_cache(wrapper, inputs)

    def kernel_report(self, module: ModuleType, kernel: str) -> dict[str, Any]:
        return {} if self.emulated else compiled_report(getattr(module, kernel, None))

    def report_facts(self, launch: Launch | None) -> Any:
        """What specializes Triton's build: tensors' dtypes and 16-byte alignment, values."""
        def fact(value: Any) -> Any:
            if isinstance(value, torch.Tensor):
                return [str(value.dtype), value.data_ptr() % 16 == 0]
            return value if isinstance(value, bool | int | float | str | None) else repr(value)

        if launch is None:
            return None
        args, kwargs = launch
        return [[fact(a) for a in args], {k: fact(v) for k, v in sorted(kwargs.items())}]

    def reports_later(self) -> str | None:
        # On a GPU: the build's own stages, but SASS is an nvdisasm run per kernel.
        if self.device in self.target.reports_after:
            return "Triton's stages and SASS come after the result (the gpu_stages follow-up)"
        target = self.options.gpu_target
        if not (self.emulated and target):
            return None
        return (f"Triton's stages compiled for {target} come after the result "
                "(the gpu_stages follow-up)")

    def kernel_reports(self, module: ModuleType, launches: dict[str, Launch | None]
                       ) -> dict[str, dict[str, Any]]:
        if not self.emulated:  # nvdisasm per kernel: subprocesses that overlap
            names = list(launches)
            with ThreadPoolExecutor(max_workers=self.options.workers()) as pool:
                return dict(zip(names, pool.map(
                    lambda name: self.kernel_report(module, name), names), strict=True))
        # The interpreter builds nothing: the stages come from an offline GPU-target build.
        target = self.options.gpu_target
        if not target:
            note = ("Triton's interpreter ran this kernel on the CPU and the gpu_target "
                    "option is off: no GPU stages")
            return {name: {"stages_note": note} for name in launches}
        return offline_reports(Path(str(module.__file__)), launches, target,
                               self.options.workers())
