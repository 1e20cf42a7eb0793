"""Where the nodes of a reduction kernel run, read from the plan alone.

`segments`: runs of nodes that share one loop over the reduction, split where a node
needs a result of the current loop, with per-output epilogues between. `ReductionWalks`:
a pointwise node over the reduction's input walks as its readers read it, so CSE
computes it once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from kernelscope.compiler.codegen.common import RINDEX, XINDEX
from kernelscope.compiler.codegen.walks import dense_walk, storage_coords, suffix_point
from kernelscope.compiler.ir.handlers import body_vars
from kernelscope.compiler.ir.indexing import decompose, simplify_index, steps_along_outputs
from kernelscope.compiler.ir.nodes import Reduction
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.nodes import SchedNode
from kernelscope.compiler.schedule.plan import KernelPlan


def segments(plan: KernelPlan) -> list[tuple[str, list[SchedNode]]]:
    """Split nodes into ("loop", nodes) runs over rindex and ("x", nodes) epilogues."""
    out: list[tuple[str, list[SchedNode]]] = []
    red_deps = reduction_deps(plan)
    for node in plan.nodes:
        domain = "x" if not node.kind.reduces and node.numel == plan.xnumel else "r"
        if domain == "x":
            out.append(("x", [node]))
            continue
        if out and out[-1][0] == "loop":
            current = {n.name for n in out[-1][1] if n.kind.reduces}
            if not (red_deps[node.name] & current):
                out[-1][1].append(node)
                continue
        out.append(("loop", [node]))
    return out


def reduction_deps(plan: KernelPlan) -> dict[str, set[str]]:
    """For each node, the in-kernel reductions it needs (directly or through others)."""
    deps: dict[str, set[str]] = {}
    kinds = {n.name: n.kind for n in plan.nodes}
    for node in plan.nodes:
        acc: set[str] = set()
        for r in node.reads:
            if r in kinds:
                acc |= {r} if kinds[r].reduces else deps.get(r, set())
        deps[node.name] = acc
    return deps


@dataclass
class ReductionWalks:
    """The coordinates of the pointwise nodes over a reduction's input (`output_vars`:
    the kernel's own coordinates of one output)."""

    plan: KernelPlan
    bounds: dict[sympy.Symbol, int]
    output_vars: Callable[[list[int]], list[Any]]

    def walks(self) -> dict[str, list[Any]]:
        """Coordinates for the pointwise nodes over the reduction's input that read no
        in-kernel reduction: the element a reader in this kernel reads at each (xindex,
        rindex), where that read densely walks the node. Any walk is correct (readers
        recompute at their own index); this one makes its loads its readers' (CSE)."""
        plan, deps = self.plan, reduction_deps(self.plan)
        nodes = {n.name: n for n in plan.nodes}
        walks: dict[str, list[Any]] = {}
        columns = self._reads_columns()
        for node in reversed(plan.nodes):
            if node.kind is not KernelKind.POINTWISE or deps[node.name] or \
                    node.numel != plan.xnumel * plan.rnumel or node.numel == plan.xnumel:
                continue
            suffix = suffix_point(list(node.ranges), plan.xnumel) if columns else None
            if suffix is not None:  # walked down the columns unless a reader says otherwise
                ranges = list(node.ranges)
                walks[node.name] = decompose(RINDEX, ranges[:suffix]) + \
                    decompose(XINDEX, ranges[suffix:])
            for reader in plan.nodes[plan.nodes.index(node) + 1:]:
                if node.name not in reader.reads or not (
                        reader.kind.reduces or reader.name in walks):
                    continue
                data = reader.buffer.data  # type: ignore[attr-defined]
                variables, rvars = body_vars(data)
                sizes = list(data.ranges) + list(getattr(data, "reduction_ranges", ()))
                index = next((i for i in reader.reads[node.name]
                              if dense_walk(i, variables + rvars, sizes, node.numel)), None)
                if index is None:
                    continue
                if reader.kind.reduces:
                    at = self._kernel_coords(reader)
                else:
                    at = dict(zip(variables, walks[reader.name]))
                flat = simplify_index(index.xreplace(at), self.bounds)
                walks[node.name] = storage_coords(nodes[node.name].buffer,  # type: ignore[arg-type]
                                                  flat)
                break
            if node.name not in walks:
                walk = self._walk_as_read(node)
                if walk is not None:
                    walks[node.name] = walk
        return walks

    def _walk_as_read(self, node: SchedNode) -> list[Any] | None:
        """Coordinates for a node with no reader in the kernel: where a reduction densely
        walks a buffer stored as this node is, the node's element at that position (its
        loads are then the reduction's)."""
        lay = node.buffer.layout
        for reader in self.plan.nodes:
            if not reader.kind.reduces:
                continue
            data = reader.buffer.data  # type: ignore[attr-defined]
            variables, rvars = body_vars(data)
            sizes = list(data.ranges) + list(data.reduction_ranges)
            for name, indexes in reader.reads.items():
                other = self.plan.buffers[name].layout
                if tuple(other.size) != tuple(lay.size) or \
                        tuple(other.stride) != tuple(lay.stride) or other.offset != lay.offset:
                    continue
                index = next((i for i in indexes
                              if dense_walk(i, variables + rvars, sizes, node.numel)), None)
                if index is not None:
                    flat = simplify_index(index.xreplace(self._kernel_coords(reader)),
                                          self.bounds)
                    return storage_coords(node.buffer, flat)  # type: ignore[arg-type]
        return None

    def _kernel_coords(self, node: SchedNode) -> dict[Any, Any]:
        """A reduction node's body variables -> its coordinates in this kernel."""
        data = node.buffer.data  # type: ignore[attr-defined]
        assert isinstance(data, Reduction)
        variables, rvars = body_vars(data)
        xs = self.output_vars(list(data.ranges))
        rs = decompose(RINDEX, list(data.reduction_ranges))
        return dict(zip(variables + rvars, xs + rs))

    def _reads_columns(self) -> bool:
        """Some reduction of the kernel reads along its outputs (x.sum(0)): a node over
        the reduction's input with no reader to follow then walks as the columns do."""
        for node in self.plan.nodes:
            if not node.kind.reduces:
                continue
            at = self._kernel_coords(node)
            loads = [simplify_index(i.xreplace(at), self.bounds)
                     for idx in node.reads.values() for i in idx]
            steps = steps_along_outputs(loads, XINDEX, self.plan.xnumel, RINDEX,
                                        self.plan.rnumel)
            if steps is not None and steps[0]:
                return True
        return False
