"""StageEvent: the one record every stage emits (docs/events.md is the contract)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

STAGES = (
    "source",
    "capture",
    "lowering",
    "scheduling",
    "memory",
    "codegen",
    "compile",
    "run",
    "profile",
)
# Events that are not a stage of their own (docs/events.md): a part of a stage streamed
# ahead of it (`capture_graph`: one captured graph, as Dynamo hands it over, before the
# whole `capture`; `waiting`: the server says what a job waits on before its worker
# runs; `progress`: what a long stage is doing, while it runs), and what follows our own
# result (`inductor`: TorchInductor on the same graphs, timed, after `profile`, only when
# asked for; `gpu_stages`: Triton's TTIR..SASS of kernels the interpreter ran, compiled
# offline for a GPU target, after `profile`).
PARTS = ("capture_graph", "waiting", "progress")
FOLLOW_UPS = ("inductor", "gpu_stages")
TERMINAL = ("error", "done")


@dataclass
class StageEvent:
    seq: int
    stage: str
    ms: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION,
            "seq": self.seq,
            "stage": self.stage,
            "ms": round(self.ms, 3),
            "data": self.data,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=_jsonable, allow_nan=False)


def _jsonable(value: Any) -> Any:
    """Fallback for values json does not know (sympy numbers, torch dtypes, sets)."""
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    if hasattr(value, "is_Integer") and value.is_Integer:
        return int(value)
    return str(value)


def finite(x: float | None) -> float | None:
    """JSON has no NaN/inf: report them as None."""
    if x is None or math.isnan(x) or math.isinf(x):
        return None
    return float(x)
