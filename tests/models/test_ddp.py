"""Kernelscope under DistributedDataParallel: 2 gloo processes on the CPU, one compiled
training step of a small transformer and a convnet in buckets small enough that
DDPOptimizer splits each graph at bucket boundaries and hands every piece to the backend.

Judged by the training suite's rule (tests/models/training_suite.py; the step runs in
tests/models/ddp_step.py) against a float64 step of the same wrapping: the loss, every
gradient of rank 0 and every parameter after AdamW. Every graph Dynamo hands the backend is
compiled by Kernelscope (one forward or inference record each in its trace directory), as
many as Dynamo hands aot_eager. The step used to
fail on its first real call with FakeTensors: DDPOptimizer did not know our backend went
through AOTAutograd (compiler/capture/aot.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PORTS = {"mlp": 29611, "conv": 29623}


def ddp_step(model: str, backend: str, tmp: Path, port: int) -> dict[str, Any]:
    out = tmp / f"{model}-{backend}.json"
    env = {**os.environ, "KS_DDP_PORT": str(port), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH"))
                                         if p)}
    proc = subprocess.run([sys.executable, str(HERE / "ddp_step.py"), model, backend, str(out)],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


@pytest.mark.parametrize("model", ["mlp", "conv"])
def test_a_ddp_step_compiled_by_kernelscope_matches_eager(model: str, tmp_path: Path) -> None:
    ours = ddp_step(model, "kernelscope", tmp_path, PORTS[model])
    bad = [r for r in ours["rows"] if not r["ok"]]
    assert not bad, bad[:5]
    assert len(ours["rows"]) > 10
    compiled = sum(k in ("forward", "inference") for k in ours["kinds"])
    assert compiled == ours["handed"], ours
    reference = ddp_step(model, "aot_eager", tmp_path, PORTS[model] + 5)
    assert ours["handed"] == reference["handed"] >= 4
