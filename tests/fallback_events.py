"""What a compile sent to ATen, read from the compiler's own events (imported as
`fallback_events`: tests/ is on the path of every test).

The backend with a trace directory (`options={"trace_dir": DIR}`, compiler/trace_dir.py)
writes one file per ATen graph it compiles; each carries the lowering stage's payload,
whose `fallbacks` list every op that went to ATen with the reason (docs/events.md). A graph
the compiler could not take at all runs eagerly, and the backend says so in a warning
("kernelscope: running graph N eagerly: ..."); those count as one fallback each.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

EAGER_GRAPH = "kernelscope: running graph"


@dataclass
class Recorded:
    """One compile's record: each ATen fallback (op, reason, graph kind) and each graph
    that ran eagerly (the backend's reason)."""

    graphs: int = 0
    fallbacks: list[dict[str, Any]] = field(default_factory=list)
    eager_graphs: list[str] = field(default_factory=list)

    def count(self) -> int:
        return len(self.fallbacks) + len(self.eager_graphs)

    def by_op(self) -> dict[str, int]:
        """How many nodes of each op went to ATen (a graph run eagerly: `<graph>`)."""
        out: dict[str, int] = {}
        for f in self.fallbacks:
            out[f["op"]] = out.get(f["op"], 0) + 1
        if self.eager_graphs:
            out["<graph>"] = len(self.eager_graphs)
        return dict(sorted(out.items()))

    def reasons(self) -> dict[str, str]:
        """Each op that went to ATen, with its (first) reason."""
        out = {f["op"]: f["reason"] for f in reversed(self.fallbacks)}
        if self.eager_graphs:
            out["<graph>"] = self.eager_graphs[0]
        return dict(sorted(out.items()))


def read_trace_dir(directory: Path) -> Recorded:
    rec = Recorded()
    for path in sorted(directory.glob("*.json")):
        record = json.loads(path.read_text())
        rec.graphs += 1
        for f in record["stages"]["lowering"]["fallbacks"]:
            rec.fallbacks.append({"op": f["op"], "reason": f["reason"], "node": f["node"],
                                  "graph": record.get("kind")})
    return rec


@contextmanager
def recording(directory: Path) -> Iterator[Recorded]:
    """Collects the eager graphs' warnings while the block runs, then the trace directory's
    fallbacks (the directory is what `compile_recorded` was given)."""
    rec = Recorded()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield rec
    found = read_trace_dir(directory)
    rec.graphs, rec.fallbacks = found.graphs, found.fallbacks
    rec.eager_graphs = [str(w.message)[:300] for w in caught if EAGER_GRAPH in str(w.message)]


def compile_recorded(fn: Callable[..., Any], directory: Path, **options: Any
                     ) -> Callable[..., Any]:
    """fn compiled with the backend, writing its trace files into `directory`."""
    torch._dynamo.reset()
    return torch.compile(fn, backend="kernelscope",
                         options={**options, "trace_dir": str(directory)})
