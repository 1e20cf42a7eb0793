"""Kernelscope under FSDP: 2 gloo processes on the CPU, one training step (the step runs in
tests/models/dist_step.py), judged by the training suite's rule against a float64 step of
the same wrapping: the loss, every gradient (gathered whole) and every parameter after
AdamW.

- FSDP2 (`fully_shard`), each block compiled then sharded (torchtitan's order): every graph
  Dynamo hands the backend is compiled by Kernelscope, as many as aot_eager is handed.
  FSDP2's own hooks are Dynamo-disabled in this torch, so its all-gathers and
  reduce-scatters run eagerly between the graphs, and no graph holds one.
- DTensor parameters gathered inside the forward (SimpleFSDP's way): the graphs hold the
  functional collectives, all-gathers in the forward, reduce-scatters in the backward,
  and Kernelscope lowers them to extern calls (compiler/lowering/collectives.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from dist_support import compiled_graphs, dist_step, failed_rows

PORTS = {"mlp": 29641, "conv": 29653}


@pytest.mark.parametrize("model", ["mlp", "conv"])
def test_an_fsdp2_step_compiled_by_kernelscope_matches_eager(model: str, tmp_path: Path
                                                             ) -> None:
    ours = dist_step("fsdp", model, "kernelscope", tmp_path, PORTS[model])
    assert not failed_rows(ours), failed_rows(ours)[:5]
    assert len(ours["rows"]) > 10
    assert ours["handed"] >= 2 and compiled_graphs(ours) == ours["handed"], ours
    assert "backward" in ours["kinds"]
    reference = dist_step("fsdp", model, "aot_eager", tmp_path, PORTS[model] + 5)
    assert ours["handed"] == reference["handed"]


def test_dtensor_fsdp_graphs_hold_collectives_and_match_eager(tmp_path: Path) -> None:
    ours = dist_step("dtensor", "mlp", "kernelscope", tmp_path, 29671)
    assert not failed_rows(ours), failed_rows(ours)[:5]
    assert compiled_graphs(ours) == ours["handed"] >= 1
    seen = Counter((c["graph"], c["kind"]) for c in ours["collectives"])
    # Every weight and bias of the model (20 tensors) is gathered once and its gradient
    # reduce-scattered once, on a group of 2.
    assert seen == {("forward", "all-gather"): 20, ("backward", "reduce-scatter"): 20}, seen
    gather = next(c for c in ours["collectives"] if c["kind"] == "all-gather")
    assert gather["group_size"] == 2 and gather["bytes_out"] == 2 * gather["bytes_in"]
