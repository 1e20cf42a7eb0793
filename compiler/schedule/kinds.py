"""What kind of kernel a scheduler node, a fused group, a kernel plan or a step is. The
questions codegen asks of a kind are properties here, so a new kind is one member with
its answers, not a branch at every place that asks.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class KernelKind(StrEnum):
    POINTWISE = "pointwise"  # one loop over the outputs
    REDUCTION = "reduction"  # outputs x a reduced dimension (rnumel)
    EXTERN = "extern"  # an ATen call: no kernel of ours, never fused
    TEMPLATE = "template"  # a GEMM template (ir/template.py); takes pointwise epilogues
    # independent pointwise kernels launched as one (schedule/horizontal.py): each part
    # runs over its own range of program ids (Triton) or blocks (C++)
    COMBO = "combo"

    @property
    def generated(self) -> bool:
        """Codegen writes a kernel for it (an extern call runs in ATen)."""
        return self is not KernelKind.EXTERN

    @property
    def reduces(self) -> bool:
        """It iterates over a reduced dimension (rnumel, `rindex`) besides the outputs."""
        return self is KernelKind.REDUCTION

    @property
    def short(self) -> str:
        """The part of a generated kernel's name that says its kind (`triton_poi_...`)."""
        return _SHORT[self]

    @staticmethod
    def of_group(kinds: Iterable[KernelKind]) -> KernelKind:
        """The kind of a group of nodes: the strongest of theirs (_RANK)."""
        return max(kinds, key=_RANK.__getitem__, default=KernelKind.POINTWISE)


_SHORT = {KernelKind.POINTWISE: "poi", KernelKind.REDUCTION: "red", KernelKind.EXTERN: "extern",
          KernelKind.TEMPLATE: "tem", KernelKind.COMBO: "combo"}
_RANK = {KernelKind.POINTWISE: 0, KernelKind.REDUCTION: 1, KernelKind.TEMPLATE: 2,
         KernelKind.COMBO: 3, KernelKind.EXTERN: 4}
