"""GEMM templates in the IR: a matrix product that is an extern call or a Triton template.

Lowering of mm / addmm / bmm on a backend that has templates (Triton) makes a
`MatmulTemplate`: an `ExternKernel` (so, until a choice is made, and whenever the extern
call wins, it is exactly the cuBLAS call it was) that also carries the product's operands
as strided views and the template configs it may run as. The compile driver measures the
choices once on the real shapes (compiler/runtime/autotune.py) and sets `chosen`; the
scheduler then treats a chosen template as a kernel of kind "template" and fuses
pointwise consumers into it as its epilogue (schedule/fusion.py).

In: lowering's realized operands. Out: a buffer the scheduler and codegen both read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelscope.compiler.ir.nodes import ExternKernel, Layout


@dataclass(frozen=True)
class TemplateConfig:
    """One point of the template's config space (block sizes are tl.constexpr)."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8  # rows of tiles that walk the same columns of B (L2 reuse)
    num_stages: int = 3
    num_warps: int = 4

    @property
    def name(self) -> str:
        return (f"{self.block_m}x{self.block_n}x{self.block_k}_g{self.group_m}"
                f"_s{self.num_stages}_w{self.num_warps}")

    def to_json(self) -> dict[str, int]:
        return {"BLOCK_M": self.block_m, "BLOCK_N": self.block_n, "BLOCK_K": self.block_k,
                "GROUP_M": self.group_m, "num_stages": self.num_stages,
                "num_warps": self.num_warps}


@dataclass(frozen=True)
class Operand:
    """A product's operand: a buffer seen through a strided view (its last two dims are
    the matrix, a leading one the batch)."""

    name: str
    view: Layout


@dataclass
class MatmulTemplate(ExternKernel):
    """C[b] = A[b] @ B[b] (batch optional), accumulated in fp32, stored in C's dtype."""

    a: Operand | None = None
    b: Operand | None = None
    configs: tuple[TemplateConfig, ...] = ()
    chosen: TemplateConfig | None = None  # None: the extern call runs
    choice_reason: str = ""
    # The products' op and shape as the UI shows them: "mm 512x768 @ 768x3072 float16"
    summary: str = ""
    timings: dict[str, float] = field(default_factory=dict)  # choice name -> ms

    @property
    def batch(self) -> int:
        return self.layout.size[0] if len(self.layout.size) == 3 else 1

    @property
    def mnk(self) -> tuple[int, int, int]:
        assert self.a is not None
        m, k = self.a.view.size[-2:]
        return m, self.layout.size[-1], k

    @property
    def is_template(self) -> bool:
        return self.chosen is not None

    @property
    def allocates_result(self) -> bool:
        return not self.is_template
