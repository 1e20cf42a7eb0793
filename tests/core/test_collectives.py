"""Functional collectives (torch.ops._c10d_functional) in a compiled graph, on a gloo group
of one process: each lowers to an extern call of the op itself (not an ATen fallback),
the events name it as a collective with its sizes, the memory plan keeps every buffer a
collective holds alive until its wait_tensor, and the results equal eager's.

A group of one moves nothing, so values alone cannot tell a dropped collective from a
kept one: the tests also read the generated wrapper and the events. Two processes (the
collectives really moving data, in DTensor-sharded training) are
tests/models/test_fsdp.py's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fcol
from ks_helpers import compiled

from kernelscope.compiler.ir.nodes import ComputedBuffer, ExternKernel, Layout, TensorArg
from kernelscope.compiler.schedule.collectives import collective_holds
from kernelscope.compiler.schedule.memory import plan_memory

c10d = torch.ops._c10d_functional

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    store = dist.FileStore(str(tmp_path_factory.mktemp("store") / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def gather_scatter_reduce(x: torch.Tensor, w: torch.Tensor, group: Any) -> torch.Tensor:
    full = fcol.all_gather_tensor(w, 0, group)
    y = (x @ full.t()).relu()
    part = fcol.reduce_scatter_tensor(y, "sum", 0, group)
    total = fcol.all_reduce(part * 2, "sum", group)
    return total + 1


def reduced(x: torch.Tensor, group: Any) -> torch.Tensor:
    r = fcol.all_reduce(x.sin(), "sum", group)
    return r + (x * 3).cos() @ x


def records(trace: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(trace.glob("*.json"))]


def test_collectives_lower_to_extern_calls_and_match_eager(group: Any, tmp_path: Path) -> None:
    x, w = torch.randn(4, 8), torch.randn(6, 8)
    fn = compiled(lambda x, w: gather_scatter_reduce(x, w, group), backend="cpp",
                  trace_dir=str(tmp_path))
    out = fn(x, w)
    torch.testing.assert_close(out, gather_scatter_reduce(x, w, group), atol=1e-5, rtol=1e-5)
    (record,) = records(tmp_path)
    stages = record["stages"]
    externs = {b["name"]: b["extern"] for b in stages["lowering"]["buffers"] if b["extern"]}
    calls = [e["collective"] for e in externs.values() if "collective" in e]
    assert [c["kind"] for c in calls] == ["all-gather", "reduce-scatter", "all-reduce"]
    assert calls[0]["bytes_in"] == calls[0]["bytes_out"] == 6 * 8 * 4
    assert calls[0]["group_size"] == 1 and calls[1]["reduce_op"] == "sum"
    assert not any(e["fallback"] for e in externs.values())
    assert not stages["lowering"].get("fallbacks")
    waits = [e["waits_on"] for e in externs.values() if "waits_on" in e]
    assert len(waits) == 3
    source = stages["codegen"]["wrapper"]["source"]
    for op in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce"):
        assert f"torch.ops._c10d_functional.{op}.default(" in source
    assert source.count("torch.ops._c10d_functional.wait_tensor.default(") == 3


def _extern(name: str, op: Any, arg: str, n: int) -> ExternKernel:
    lay = Layout.contiguous("cpu", torch.float32, [n])
    targ = TensorArg(arg, (n,), (1,), 0, (n,), (1,))
    extra = ("sum", "0") if op is c10d.all_reduce.default else ()
    return ExternKernel(name, lay, frozenset([name]), op, (targ, *extra), {}, [], False)


def test_no_buffer_a_collective_holds_is_reused_before_its_wait() -> None:
    """y is last read by the all-reduce at step 1, and z (y's size) is made at step 2,
    before the wait at step 3: z must not take y's storage, which the collective may still
    be reading; the wait's result is the collective's buffer, alive while it is used."""
    n = 256
    buffers: dict[str, Any] = {
        "y": ComputedBuffer("y", Layout.contiguous("cpu", torch.float32, [n])),
        "c": _extern("c", c10d.all_reduce.default, "y", n),
        "z": ComputedBuffer("z", Layout.contiguous("cpu", torch.float32, [n])),
        "w": _extern("w", c10d.wait_tensor.default, "c", n),
        "out": ComputedBuffer("out", Layout.contiguous("cpu", torch.float32, [n])),
    }
    steps = [(["y"], {"x"}), (["c"], {"y"}), (["z"], {"x"}), (["w"], {"c"}),
             (["out"], {"w", "z"})]
    names = ["k0", "extern_all_reduce_1", "k2", "extern_wait_tensor_3", "k4"]
    externs = [None, buffers["c"], None, buffers["w"], None]
    unheld = plan_memory(steps, buffers, {"out"}, set())
    assert unheld.plan_of("z").reused_from == "y"  # type: ignore[union-attr]
    held = collective_holds(names, externs)
    assert {(h.buffer, h.why, h.wait) for h in held.holds} == {
        ("y", "input", "extern_wait_tensor_3"), ("c", "result", "extern_wait_tensor_3")}
    plan = plan_memory(steps, buffers, {"out"}, set(), collectives=held)
    by = {p.name: p for p in plan.buffers}
    assert by["z"].reused_from is None and by["y"].last == 3
    assert by["y"].held_by == by["c"].held_by == "extern_all_reduce_1"
    assert by["w"].storage == "c" and by["w"].bytes == 0
    assert by["c"].last >= by["w"].last == 4
    assert by["out"].storage not in ("c", "w")


def test_a_wait_on_a_fallback_result_is_that_buffer() -> None:
    """A coalesced collective falls back to ATen (no hold), but its wait still returns the
    output itself: the wait's result takes that storage and is never handed on for reuse."""
    n = 64
    buffers: dict[str, Any] = {
        "o": _extern("o", torch.ops.aten.sin.default, "x", n),
        "w": _extern("w", c10d.wait_tensor.default, "o", n),
        "z": ComputedBuffer("z", Layout.contiguous("cpu", torch.float32, [n])),
        "out": ComputedBuffer("out", Layout.contiguous("cpu", torch.float32, [n])),
    }
    steps = [(["o"], {"x"}), (["w"], {"o"}), (["z"], {"w"}), (["out"], {"z"})]
    held = collective_holds(["e0", "e1", "k2", "k3"],
                            [buffers["o"], buffers["w"], None, None])
    assert held.aliases == {"w": "o"} and not held.holds
    plan = plan_memory(steps, buffers, {"out"}, set(), collectives=held)
    by = {p.name: p for p in plan.buffers}
    assert by["w"].storage == "o" and by["w"].bytes == 0
    assert by["out"].reused_from != "w" and by["o"].last >= by["w"].last


def test_a_wait_result_is_the_collective_buffer_in_the_plan(group: Any, tmp_path: Path
                                                            ) -> None:
    x = torch.randn(16, 16)
    fn = compiled(lambda x: reduced(x, group), backend="cpp", trace_dir=str(tmp_path))
    fn(x)
    (record,) = records(tmp_path)
    plan = record["stages"]["memory"]
    result = next(h for h in plan["holds"] if h["why"] == "result")["buffer"]
    waits = [b for b in plan["buffers"] if b["storage"] == result and b["name"] != result]
    assert waits and all(b["bytes"] == 0 for b in waits)
    collective = next(b for b in plan["buffers"] if b["name"] == result)
    assert collective["last"] >= max(b["last"] for b in waits)


def test_a_dtensor_step_passes_its_process_group_to_the_backward(group: Any,
                                                                  tmp_path: Path) -> None:
    """A weight sharded as a DTensor and gathered in the forward: AOTAutograd hands the
    forward the process group as an opaque input, which it returns for the backward. The
    wrapper used to print the object (a syntax error) instead of passing it by name."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    full = torch.randn(6, 8)
    x = torch.randn(4, 8)

    def loss(w: Any) -> torch.Tensor:
        whole = w.redistribute(placements=[Replicate()]).to_local(grad_placements=[Partial()])
        return (x @ whole.t()).relu().sum()

    grads = []
    for run in (loss, compiled(loss, backend="cpp", trace_dir=str(tmp_path))):
        w = torch.nn.Parameter(distribute_tensor(full, mesh, [Shard(0)]))
        run(w).backward()
        grads.append(w.grad.full_tensor())
    torch.testing.assert_close(grads[1], grads[0], atol=1e-5, rtol=1e-5)
    kinds = sorted(r["kind"] for r in records(tmp_path))
    assert kinds == ["backward", "forward"]
