"""What the Triton and C++ kernels share: line buffers, CSE scopes, values.

`Lines` is an indented line buffer in which every line remembers the FX nodes it came
from, which is how the `codegen` event maps each kernel line back to the user's source.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from kernelscope.compiler.ir.indexing import sym


@dataclass(slots=True)
class Line:
    """One written line; never changed once written (buffers share them)."""

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
        if not self.level:  # nothing to indent: the same lines
            self.lines.extend(other.lines)
            return
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

    @contextlib.contextmanager
    def braced(self, header: str) -> Iterator[None]:
        """A C block: `header`, then what the `with` body writes, indented in braces."""
        self.write(header)
        self.write("{")
        with self.indent():
            yield
        self.write("}")

    def text(self) -> str:
        return "\n".join(line.text for line in self.lines) + "\n"

    def line_map(self) -> list[dict[str, Any]]:
        """1-based line -> the FX nodes and buffers it came from (tagged lines only)."""
        return [{"line": i + 1, "origins": list(ln.origins), "buffers": list(ln.buffers)}
                for i, ln in enumerate(self.lines) if ln.origins or ln.buffers]


@dataclass
class Var:
    """A value in generated code: its name (or literal text), dtype and domain."""

    name: str
    dtype: torch.dtype
    domain: str = "x"  # "x" (per output) or "r" (per reduction element)
    value: bool | int | float | None = None  # a literal's Python value (None: not one)

    @property
    def is_literal(self) -> bool:
        return self.value is not None

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


XINDEX, RINDEX = sym("xindex"), sym("rindex")


def next_power_of_2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p
