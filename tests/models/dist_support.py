"""Runs tests/models/dist_step.py (one training step on 2 gloo processes) in a subprocess
and returns what rank 0 wrote: shared by test_ddp.py and test_fsdp.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def dist_step(wrap: str, model: str, backend: str, tmp: Path, port: int) -> dict[str, Any]:
    out = tmp / f"{wrap}-{model}-{backend}.json"
    env = {**os.environ, "KS_DIST_PORT": str(port), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    proc = subprocess.run(
        [sys.executable, str(HERE / "dist_step.py"), wrap, model, backend, str(out)],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def failed_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in result["rows"] if not r["ok"]]


def compiled_graphs(result: dict[str, Any]) -> int:
    """Graphs Kernelscope compiled as the graph Dynamo handed it (forward or inference)."""
    return sum(k in ("forward", "inference") for k in result["kinds"])
