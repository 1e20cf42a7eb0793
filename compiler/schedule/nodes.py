"""Scheduler nodes: one per buffer that a kernel (or an extern call) writes.

Each node knows what it reads (buffers and index expressions, from its loop body), what
it writes, and its iteration space: `numel` outputs, each reducing `rnumel` inputs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import sympy

from kernelscope.compiler.ir.handlers import reads_of
from kernelscope.compiler.ir.indexing import index_vars, merge_loops
from kernelscope.compiler.ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternKernel,
    ExternOutput,
    Reduction,
)
from kernelscope.compiler.ir.template import MatmulTemplate
from kernelscope.compiler.lowering.graph import LoweredGraph
from kernelscope.compiler.schedule.collectives import tensor_names
from kernelscope.compiler.schedule.kinds import KernelKind


@dataclass
class SchedNode:
    buffer: Buffer
    order: int
    kind: KernelKind
    numel: int
    rnumel: int
    reads: dict[str, list[sympy.Expr]] = field(default_factory=dict)
    writes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def ranges(self) -> tuple[int, ...]:
        if isinstance(self.buffer, MatmulTemplate):
            return self.buffer.layout.size
        data = self.buffer.data if isinstance(self.buffer, ComputedBuffer) else None
        return data.ranges if data is not None else ()

    def write_index(self) -> sympy.Expr:
        return self.buffer.layout.index(index_vars("i", len(self.ranges)))


def build_nodes(graph: LoweredGraph) -> list[SchedNode]:
    nodes: list[SchedNode] = []
    by_parent: dict[str, SchedNode] = {}
    for buf in graph.buffers:
        if isinstance(buf, ExternOutput):
            by_parent[buf.parent].writes.append(buf.name)
            continue
        if isinstance(buf, ExternKernel):  # a chosen GEMM template is a kernel of ours
            template = isinstance(buf, MatmulTemplate) and buf.is_template
            node = SchedNode(buf, len(nodes), KernelKind.TEMPLATE if template else
                             KernelKind.EXTERN, buf.layout.numel(), 1)
            node.reads = {name: [] for name in tensor_names((buf.args, buf.kwargs))}
            node.writes = [buf.name]
            if not template:
                by_parent[buf.name] = node
            nodes.append(node)
            continue
        assert isinstance(buf, ComputedBuffer) and buf.data is not None
        data = buf.data
        is_red = isinstance(data, Reduction)
        node = SchedNode(buf, len(nodes), KernelKind.REDUCTION if is_red else KernelKind.POINTWISE,
                         data.numel(), data.rnumel() if isinstance(data, Reduction) else 1)
        for read in reads_of(data):
            node.reads.setdefault(read.buffer, []).append(read.index)
        node.writes = [buf.name]
        nodes.append(node)
    return nodes


def canonical(expr: sympy.Expr, variables: list[sympy.Symbol], sizes: list[int]
              ) -> tuple[tuple[int, ...], sympy.Expr]:
    """An index over a loop nest, with contiguous dims merged and variables renamed."""
    return _canonical(sympy.sympify(expr), tuple(variables), tuple(sizes))


@functools.lru_cache(maxsize=1 << 14)  # fusion asks the same question many times
def _canonical(expr: sympy.Expr, variables: tuple[sympy.Symbol, ...], sizes: tuple[int, ...]
               ) -> tuple[tuple[int, ...], sympy.Expr]:
    new_sizes, rewrite = merge_loops(list(sizes), [expr], list(variables))
    cvars = index_vars("c", len(new_sizes))
    return tuple(new_sizes), rewrite(expr, cvars)
