"""Kernelscope under DistributedDataParallel: 2 gloo processes on the CPU, one compiled
training step of a small transformer and a convnet in buckets small enough that
DDPOptimizer splits each graph at bucket boundaries and hands every piece to the backend.

Judged by the training suite's rule (tests/models/training_suite.py; the step runs in
tests/models/dist_step.py) against a float64 step of the same wrapping: the loss, every
gradient of rank 0 and every parameter after AdamW. Every graph Dynamo hands the backend is
compiled by Kernelscope (one forward or inference record each in its trace directory), as
many as Dynamo hands aot_eager. The step used to
fail on its first real call with FakeTensors: DDPOptimizer did not know our backend went
through AOTAutograd (compiler/capture/aot.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dist_support import compiled_graphs, dist_step, failed_rows

PORTS = {"mlp": 29611, "conv": 29623}


@pytest.mark.parametrize("model", ["mlp", "conv"])
def test_a_ddp_step_compiled_by_kernelscope_matches_eager(model: str, tmp_path: Path) -> None:
    ours = dist_step("ddp", model, "kernelscope", tmp_path, PORTS[model])
    assert not failed_rows(ours), failed_rows(ours)[:5]
    assert len(ours["rows"]) > 10
    assert compiled_graphs(ours) == ours["handed"], ours
    # The records of the split graphs say which DDP bucket each is, and why it ends there:
    # per Dynamo compile, one forward graph per bucket.
    splits = [s for s in ours["splits"] if s["kind"] == "forward"]
    by_compile: dict[str, list[int]] = {}
    for s in splits:
        assert s["by"] == "DDPOptimizer" and "bucket" in s["reason"], s
        assert s["bucket_bytes"] > 0 and s["params"], s
        by_compile.setdefault(s["compile_id"], []).append(s["index"])
    assert by_compile and sum(map(len, by_compile.values())) >= 3, ours["splits"]
    for cid, indices in by_compile.items():
        count = next(s["count"] for s in splits if s["compile_id"] == cid)
        assert sorted(indices) == list(range(count)), (cid, indices)
    reference = dist_step("ddp", model, "aot_eager", tmp_path, PORTS[model] + 5)
    assert ours["handed"] == reference["handed"] >= 4
