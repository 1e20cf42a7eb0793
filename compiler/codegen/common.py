"""What the Triton and C++ kernels share: line buffers, CSE, and the kernel plan.

`KernelPlan` is a fused group seen from codegen: its nodes, the buffers it must load
(in_ptr0, ...) and store (out_ptr0, ...), and its iteration space. `Lines` is an
indented line buffer in which every line remembers the FX nodes it came from, which is
how the `codegen` event maps each kernel line back to the user's source.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import sympy
import torch

from compiler.ir.indexing import sym
from compiler.ir.nodes import Buffer, ComputedBuffer
from compiler.schedule.nodes import SchedNode


@dataclass
class Line:
    text: str
    origins: tuple[str, ...] = ()
    buffers: tuple[str, ...] = ()


class Lines:
    """An indented list of lines, each tagged with its origins."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.level = 0

    def write(self, text: str, origins: tuple[str, ...] = (),
              buffers: tuple[str, ...] = ()) -> None:
        self.lines.append(Line("    " * self.level + text if text else "", origins, buffers))

    def extend(self, other: Lines) -> None:
        for line in other.lines:
            self.lines.append(Line("    " * self.level + line.text if line.text else "",
                                   line.origins, line.buffers))

    @contextlib.contextmanager
    def indent(self, n: int = 1) -> Iterator[None]:
        self.level += n
        try:
            yield
        finally:
            self.level -= n

    def text(self) -> str:
        return "\n".join(line.text for line in self.lines) + "\n"


@dataclass
class Var:
    """A value in generated code: its name and dtype (and, for Triton, its domain)."""

    name: str
    dtype: torch.dtype
    domain: str = "x"  # "x" (per output) or "r" (per reduction element)

    def __str__(self) -> str:
        return self.name


class Scope:
    """CSE table of one code block; lookups fall through to enclosing blocks."""

    def __init__(self, lines: Lines, parent: Scope | None = None) -> None:
        self.lines = lines
        self.parent = parent
        self.cache: dict[str, Var] = {}

    def get(self, key: str) -> Var | None:
        scope: Scope | None = self
        while scope is not None:
            if key in scope.cache:
                return scope.cache[key]
            scope = scope.parent
        return None


@dataclass
class KernelPlan:
    name: str
    kind: str  # "pointwise" | "reduction"
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
    def written(self) -> dict[str, ComputedBuffer]:
        return {n.name: n.buffer for n in self.nodes}  # type: ignore[misc]

    def arg_names(self) -> dict[str, str]:
        names = {b: f"in_ptr{i}" for i, b in enumerate(self.inputs)}
        names.update({b: f"out_ptr{i}" for i, b in enumerate(self.stores)})
        return names


XINDEX, RINDEX = sym("xindex"), sym("rindex")


def domain_of(expr: sympy.Expr) -> str:
    return "r" if RINDEX in sympy.sympify(expr).free_symbols else "x"


def next_power_of_2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p
