"""The model zoo's runner: one training step of each architecture of zoo_models.py on the
CPU in float32, compiled, judged against a float64 eager step by the training suite's 3x
rule (training_suite.check / judge), with the ops that went to ATen read from the
compiler's own events (tests/fallback_events.py).

Every model has a float64 reference: the MoE models' runs transformers' loop over the
experts, the same function as the grouped_mm their float32 steps call (grouped_mm takes
float32, bfloat16 and float16 only).

`row(name)` is one table row (with `inductor`, Inductor's verdict on the same step beside
ours). tests/models/test_zoo.py asserts the rows; tests/models/zoo_table.py prints them
as docs/coverage.md's table.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/: fallback_events
sys.path.insert(0, str(HERE))
from fallback_events import recording  # noqa: E402
from training_suite import check  # noqa: E402
from zoo_models import MODELS, build  # noqa: E402

BASELINE = HERE / "zoo_fallbacks.json"
def row(name: str, inductor: bool = False) -> dict[str, Any]:
    """One training step of model `name`: ok, the worst error as a fraction of its bound,
    what failed, the ops on ATen and why, how long it took; with `inductor`, Inductor's
    ok, worst and failures on the same step (`inductor_*`)."""
    case = build(name)
    start, cpu = time.perf_counter(), _cpu_seconds()
    torch._dynamo.reset()
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)) as rec:
        rows = check(case, inductor=inductor, options={"trace_dir": tmp})
    out: dict[str, Any] = {
        "model": name, "family": MODELS[name][0],
        "reference": "float64 eager" + (", experts looped" if case.reference else ""),
        "tensors": len(rows), **_verdict(rows, "ok", "ours_err"),
        "fallbacks": rec.count(), "by_op": rec.by_op(), "reasons": rec.reasons()}
    if inductor:
        out.update({f"inductor_{k}": v for k, v in
                    _verdict(rows, "inductor_ok", "inductor_err").items()})
    out["seconds"] = round(time.perf_counter() - start, 1)
    out["cpu_seconds"] = round(_cpu_seconds() - cpu, 1)
    return out


def _cpu_seconds() -> float:
    """This process's CPU time and its finished children's (g++ builds): a cost a busy
    host does not inflate as it does the wall clock."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), \
        resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _verdict(rows: list[dict[str, Any]], ok: str, err: str) -> dict[str, Any]:
    failed = [r["key"] for r in rows if not r.get(ok, False)]
    worst = max((r[err] / r["bound"] for r in rows if r.get(err) is not None
                 and r["bound"] > 0), default=0.0)
    return {"ok": not failed, "worst": round(worst, 3), "failed": failed[:8]}


def baseline() -> dict[str, int]:
    """Each model's fallback count at the baseline (an upper bound: none may gain)."""
    return {name: entry["fallbacks"] for name, entry in
            json.loads(BASELINE.read_text())["models"].items()}
