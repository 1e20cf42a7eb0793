"""A code generation target: the one object asked everything that differs between targets.

The driver chooses one `Backend` per graph (codegen/backends.py); the scheduler, codegen,
the wrapper and the compile stage ask it for names, kernels, prelude lines, builds and
reports. Nothing outside the backend modules compares backend names.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import torch

from kernelscope.compiler.codegen.optable import CodegenError, OpTable
from kernelscope.compiler.codegen.targets import Target
from kernelscope.compiler.features import Features
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.plan import KernelPlan


class BuildError(Exception):
    """A backend failed to build a graph's kernels; names the kernel where it can."""

    def __init__(self, message: str, kernel: str | None, log: str) -> None:
        super().__init__(message)
        self.kernel = kernel
        self.log = log


@dataclass
class BuildResult:
    path: Path | None  # the built artifact (None: nothing is built ahead of the first launch)
    cache_hit: bool
    ms: float


Launch = tuple[tuple[Any, ...], dict[str, Any]]  # a kernel launch's arguments, keywords


@dataclass
class GeneratedKernel:
    """One kernel's source, how the wrapper launches it, and its line-to-origin map."""

    name: str
    source: str
    line_map: list[dict[str, Any]]
    args: list[str]  # buffer names, in signature order
    launch: str  # the wrapper line that runs it
    config: dict[str, Any] = field(default_factory=dict)  # grid, block sizes, warps


class Backend:
    """One subclass per target (codegen/backends.py); its name, label and language are its
    row of the torch-free codegen/targets.py (`target`)."""

    target: ClassVar[Target]
    name: ClassVar[str]  # what options and events call it ("triton")
    label: ClassVar[str]  # what the UI shows ("Triton")
    language: ClassVar[str]  # the highlighting language of its kernel sources
    source_suffix: ClassVar[str] = ""  # file suffix of what `build` compiles ("" = nothing)
    features: ClassVar[Features] = frozenset()  # what it can do (compiler/features.py)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        t = cls.target
        cls.name, cls.label, cls.language = t.name, t.label, t.language

    def __init__(self, device: str, options: CompileOptions) -> None:
        self.device = device
        self.options = options

    @property
    def emulated(self) -> bool:
        """True when the kernels run in an emulator (timings would mean nothing)."""
        return self.target.emulated_on(self.device)

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.name, "backend_label": self.label, "emulated": self.emulated}

    # -- scheduling -----------------------------------------------------------------------
    def kernel_prefix(self, kind: KernelKind, rnumel: int) -> str:
        return f"{self.name}_{kind.short}"

    def combo_refusal(self, plan: KernelPlan) -> str | None:
        """Why a pointwise plan cannot be a combo kernel's part (None: it can)."""
        return f"the {self.label} backend makes no combo kernels"

    # -- lowering -------------------------------------------------------------------------
    def op_table(self) -> OpTable:
        """How this backend's kernels spell each op, per operand dtype."""
        raise NotImplementedError

    def refuses(self, op: str, dtype: torch.dtype) -> str | None:
        """Why this backend cannot express `op` on `dtype` operands (None: it can)."""
        try:
            self.op_table().rule(op, dtype)
        except CodegenError as e:
            return str(e)
        return None

    # -- codegen --------------------------------------------------------------------------
    def generate(self, plan: KernelPlan, header: list[str]) -> GeneratedKernel:
        raise NotImplementedError

    def wrapper_prelude(self, kernels: list[GeneratedKernel], artifact: Path | None
                        ) -> list[str]:
        """Wrapper lines after the common imports: the kernels' definitions or loaders."""
        raise NotImplementedError

    def launch_facts(self, aligned: dict[str, tuple[int, ...]]) -> list[str]:
        """Wrapper lines that tell the launch path what it need not check per launch
        (`aligned`: per kernel, the arguments the wrapper allocates itself)."""
        return []

    def build_source(self, kernels: list[GeneratedKernel]) -> str:
        """What `build` compiles ahead of the first launch ("" when nothing is)."""
        return ""

    # -- compile --------------------------------------------------------------------------
    def artifact_path(self, source_path: Path) -> Path | None:
        """Where `build` puts what it builds from `source_path`."""
        return None

    def build(self, source_path: Path | None) -> BuildResult:
        """Build the source written at `source_path`; make the kernels loadable."""
        return BuildResult(None, True, 0.0)

    def first_launch(self, wrapper: Path, inputs: list[dict[str, Any]] | None
                     ) -> AbstractContextManager[object]:
        """What surrounds a graph's first launch; `inputs` describe its arguments."""
        return nullcontext()

    def template_configs(self, m: int, n: int, k: int, dtype: torch.dtype) -> list[Any]:
        """The GEMM template configs worth measuring for an m x n x k product."""
        return []

    def template_kernel(self, plan: KernelPlan, header: list[str], config: Any
                        ) -> GeneratedKernel:
        """A template plan's kernel with `config`."""
        raise NotImplementedError(f"{self.label} has no GEMM template")

    def after_import(self, module: ModuleType, kernels: list[str]) -> None:
        """What the backend does to a graph's module once imported, before any call."""

    def cache_identity(self) -> dict[str, str]:
        """What besides the graph and options decides the code (its tools): a cache key part."""
        return {"backend": self.name}

    def prebuild(self, module: ModuleType, kernels: list[GeneratedKernel],
                 dtypes: dict[str, torch.dtype], workers: int) -> dict[str, Any]:
        """Build ahead, in parallel, what the first launch would; what was built ({}: none)."""
        return {}

    def kernel_report(self, module: ModuleType, kernel: str) -> dict[str, Any]:
        """What the build knows of one kernel after its first launch (the `compile` event's
        `registers`, `spills`, `shared_bytes`, `ir`, `line_maps`; {} where nothing is)."""
        return {}

    def report_facts(self, launch: Launch | None) -> Any:
        """What of a kernel's first launch its report depends on (None: nothing)."""
        return None

    def kernel_reports(self, module: ModuleType, launches: dict[str, Launch | None]
                       ) -> dict[str, dict[str, Any]]:
        """`kernel_report` of each kernel (`launches`: each one's first launch)."""
        return {name: self.kernel_report(module, name) for name in launches}

    def reports_later(self) -> str | None:
        """The note a kernel carries while its slow reports come later (the `gpu_stages`
        follow-up); None: they come with the compile stage."""
        return None
