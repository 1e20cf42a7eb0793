"""Kernel names unique across the graphs of one trace: the one rule, for a job's trace and
for your own run's.

Each graph's kernels are numbered on from the graphs before it in the same trace (a graph
break's two graphs, or a forward and its backward, each had a `..._0`, and one name then
pointed at two kernels). A job's graphs are scheduled in order in one process
(compiler/pipeline.py); your own run's graphs compile one at a time as the script calls
them, perhaps in several backends or processes writing into one trace directory
(compiler/trace/writer.py), so there the next number is kept in a file of that directory,
taken under a lock for as long as one graph is scheduled.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from kernelscope.compiler.graph_work import GraphWork

R = TypeVar("R")
NUMBERS_FILE = "kernel-numbers"  # in a trace directory (not *.json: no trace file)


@dataclass
class KernelNumbers:
    """Where the next graph's kernel numbers start."""

    next: int = 0

    def schedule(self, work: GraphWork, stage: Callable[[GraphWork], R]) -> R:
        """Run `stage` (scheduling, which names the kernels) with the graph's numbers
        starting at `next`; the graph after it starts after its kernels."""
        work.first_step = self.next
        out = stage(work)
        self.next += len(work.sched.steps) if work.sched is not None else 0
        return out


@contextlib.contextmanager
def numbered_in(folder: Path) -> Iterator[KernelNumbers]:
    """A trace directory's numbers, held (an exclusive lock on its file) until the block
    ends, then kept for the next graph written there."""
    with open(folder / NUMBERS_FILE, "a+", encoding="ascii") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file closes
        f.seek(0)
        text = f.read().strip()
        numbers = KernelNumbers(int(text) if text.isdigit() else 0)
        yield numbers
        f.seek(0)
        f.truncate()
        f.write(str(numbers.next))
