"""The scheduler's output for one fused kernel, as codegen reads it: nodes in program
order, the buffers it loads and stores, and its `xnumel` x `rnumel` iteration space.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelscope.compiler.ir.nodes import Buffer, ComputedBuffer
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.nodes import SchedNode


@dataclass
class KernelPlan:
    name: str
    kind: KernelKind  # a generated kind (never EXTERN); TEMPLATE: its first node is the product
    xnumel: int
    rnumel: int
    nodes: list[SchedNode]
    buffers: dict[str, Buffer]  # every buffer the kernel touches, by name
    stores: list[str]  # written buffers that must reach memory
    inputs: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        written = {n.name for n in self.nodes}
        reads: list[str] = []
        for n in self.nodes:
            for r in n.reads:
                if r not in written and r not in reads:
                    reads.append(r)
        self.inputs = reads
        seen: list[str] = []
        for n in self.nodes:
            for o in sorted(n.buffer.origins):
                if o not in seen:
                    seen.append(o)
        self.origins = seen

    @property
    def device(self) -> str:
        """Where the kernel runs: its nodes' device (fusion never mixes devices)."""
        return self.nodes[0].buffer.device

    @property
    def written(self) -> dict[str, ComputedBuffer]:
        return {n.name: n.buffer for n in self.nodes}  # type: ignore[misc]

    def arg_names(self) -> dict[str, str]:
        names = {b: f"in_ptr{i}" for i, b in enumerate(self.inputs)}
        names.update({b: f"out_ptr{i}" for i, b in enumerate(self.stores)})
        return names


@dataclass
class ComboPlan(KernelPlan):
    """Independent pointwise kernels launched as one (schedule/horizontal.py): its nodes,
    inputs and stores are its parts'; each part keeps its own plan."""

    parts: list[KernelPlan] = field(default_factory=list)

    @staticmethod
    def of(name: str, parts: list[KernelPlan]) -> ComboPlan:
        nodes = [n for p in parts for n in p.nodes]
        stores = [s for p in parts for s in p.stores]
        buffers = {k: v for p in parts for k, v in p.buffers.items()}
        return ComboPlan(name, KernelKind.COMBO, sum(p.xnumel for p in parts), 1, nodes,
                         buffers, stores, parts=parts)

    def part_of(self, buffer: str) -> KernelPlan | None:
        """The part that computes `buffer` (None: no part does)."""
        return next((p for p in self.parts if buffer in p.written), None)
