"""A code generation target: the one object asked everything that differs between targets.

The driver chooses one `Backend` per graph (compiler/codegen/backends.py, from where the
graph's tensors live) and carries it on the graph's work item. The scheduler asks it for
kernel names, codegen for kernels (its kernel class holds the dtype-aware op table) and
their launch lines, the wrapper for what the module must import first, the compile stage
to build what codegen wrote, and afterwards what the build reports. Nothing outside the
backend modules compares backend names.

In: kernel plans (compiler/schedule/plan.py) and the graph's device. Out: generated
kernels, wrapper prelude lines, built artifacts and their reports.
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
    """Base class; one subclass per target, registered in codegen/backends.py. Its name,
    label, language and devices are its row of codegen/targets.py (torch-free, so a
    process can ask them before it imports torch)."""

    target: ClassVar[Target]
    name: ClassVar[str]  # what options and events call it ("triton")
    label: ClassVar[str]  # what the UI shows ("Triton")
    language: ClassVar[str]  # the highlighting language of its kernel sources
    devices: ClassVar[tuple[str, ...]]  # where "auto" picks it
    also_runs_on: ClassVar[tuple[str, ...]] = ()  # where it runs only when asked for
    source_suffix: ClassVar[str] = ""  # file suffix of what `build` compiles ("" = nothing)
    features: ClassVar[Features] = frozenset()  # what it can do (compiler/features.py)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        t = cls.target
        cls.name, cls.label, cls.language = t.name, t.label, t.language
        cls.devices, cls.also_runs_on = t.devices, t.also_runs_on

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
        """Why a pointwise plan cannot be a part of a combo kernel (schedule/horizontal.py),
        or None when it can."""
        return f"the {self.label} backend makes no combo kernels"

    # -- lowering -------------------------------------------------------------------------
    def op_table(self) -> OpTable:
        """How this backend's kernels spell each op, per operand dtype."""
        raise NotImplementedError

    def refuses(self, op: str, dtype: torch.dtype) -> str | None:
        """Why this backend cannot express `op` on `dtype` operands (lowering then leaves
        the node to ATen and says so), or None when it can."""
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
        """Wrapper lines that tell the launch path, once, what it need not check per
        launch (`aligned`: per kernel, the arguments the wrapper allocates itself)."""
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
        """What surrounds a graph's first launch (where kernels that build at their first
        launch build); `inputs` describe its arguments (None: not describable)."""
        return nullcontext()

    def template_configs(self, m: int, n: int, k: int, dtype: torch.dtype) -> list[Any]:
        """The GEMM template configs worth measuring for an m x n x k product."""
        return []

    def template_kernel(self, plan: KernelPlan, header: list[str], config: Any
                        ) -> GeneratedKernel:
        """A template plan's kernel with `config` (the chosen one, or one being measured)."""
        raise NotImplementedError(f"{self.label} has no GEMM template")

    def after_import(self, module: ModuleType, kernels: list[str]) -> None:
        """What the backend does to a graph's module once it is imported, before any call
        (`kernels`: the names of its kernels)."""

    def cache_identity(self) -> dict[str, str]:
        """What, besides the graph and the options, decides the code this backend makes
        and builds (its tools): part of the whole-graph cache's key."""
        return {"backend": self.name}

    def prebuild(self, module: ModuleType, kernels: list[GeneratedKernel],
                 dtypes: dict[str, torch.dtype], workers: int) -> dict[str, Any]:
        """Build what the first launch would build, ahead and in parallel (`workers`, 0:
        one per core); what was built, for the compile event ({} when nothing is)."""
        return {}

    def pool_build(self, items: list[tuple[ModuleType, list[GeneratedKernel],
                                           dict[str, torch.dtype]]]) -> dict[str, Any]:
        """Compile the kernels of several loaded modules in worker processes, into the
        cache their first launch reads; what was built and what fell back, for the
        compile event ({} when nothing is)."""
        return {}

    def kernel_report(self, module: ModuleType, kernel: str) -> dict[str, Any]:
        """What the build knows about one kernel after its first launch, as fields of the
        kernel's `compile` event entry: `registers`, `spills`, `shared_bytes`, `ir`
        (stage name -> text), `line_maps`; empty where nothing is known."""
        return {}

    def report_facts(self, launch: Launch | None) -> Any:
        """What of a kernel's first launch its report depends on (beside the wrapper, the
        backend and its options): nothing, where the report reads the build alone."""
        return None

    def kernel_reports(self, module: ModuleType, launches: dict[str, Launch | None]
                       ) -> dict[str, dict[str, Any]]:
        """`kernel_report` of each kernel; `launches` holds each one's first launch (its
        arguments), for a backend that builds again from them."""
        return {name: self.kernel_report(module, name) for name in launches}

    def reports_later(self) -> str | None:
        """Where the kernels' reports take seconds and are not needed for the result (a
        build for another target), the note a kernel carries until they come (the
        `gpu_stages` follow-up); None: they come with the compile stage."""
        return None
