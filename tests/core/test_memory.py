"""The memory plan: lifetimes, reuse of dead buffers, peak with and without reuse."""

from __future__ import annotations

import torch
from ks_helpers import lower_fn

from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.ir.nodes import ComputedBuffer, Layout
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.memory import plan_memory
from kernelscope.compiler.schedule.scheduler import schedule

CPP = choose_backend("cpp", "cpu", CompileOptions())


def buf(name: str, n: int) -> ComputedBuffer:
    return ComputedBuffer(name, Layout.contiguous("cpu", torch.float32, [n]))


def test_dead_buffer_storage_is_reused_and_peak_drops() -> None:
    buffers = {n: buf(n, 256) for n in ("a", "b", "c", "d")}
    steps = [(["a"], set()), (["b"], {"a"}), (["c"], {"b"}), (["d"], {"c"})]
    plan = plan_memory(steps, buffers, outputs={"d"}, removed=set())
    by = {p.name: p for p in plan.buffers}
    assert by["a"].last == 1 and by["b"].first == 1
    assert by["c"].reused_from == "a"  # a died after step 1; c is allocated at step 2
    assert by["d"].reused_from == "b"
    assert plan.peak_bytes == 2 * 1024
    assert plan.peak_bytes_no_reuse == 4 * 1024  # nothing freed before the graph returns
    no_reuse = plan_memory(steps, buffers, outputs={"d"}, removed=set(), reuse=False)
    assert all(p.reused_from is None for p in no_reuse.buffers)


def test_outputs_and_other_sizes_are_never_reused() -> None:
    buffers = {"a": buf("a", 256), "b": buf("b", 128), "c": buf("c", 256)}
    steps = [(["a"], set()), (["b"], {"a"}), (["c"], {"b"})]
    plan = plan_memory(steps, buffers, outputs={"a", "c"}, removed=set())
    assert all(p.reused_from is None for p in plan.buffers)
    plan = plan_memory(steps, buffers, outputs={"c"}, removed=set())
    assert {p.name: p.reused_from for p in plan.buffers}["c"] == "a"


def test_removed_buffers_are_not_allocated() -> None:
    (_, lowered), = lower_fn(lambda x: torch.softmax(x, -1), torch.randn(4, 10))
    s = schedule(lowered, CPP)
    steps = [(st.writes(), st.reads()) for st in s.steps]
    plan = plan_memory(steps, s.buffers, lowered.output_names(), s.removed)
    assert [p.name for p in plan.buffers] == sorted(lowered.output_names())


def test_chain_with_unfused_steps_reuses_buffers() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        a = torch.relu(x @ w)
        b = torch.sigmoid(a @ w)
        c = torch.tanh(b @ w)
        return c @ w

    (_, lowered), = lower_fn(fn, torch.randn(16, 16), torch.randn(16, 16))
    s = schedule(lowered, CPP)
    steps = [(st.writes(), st.reads()) for st in s.steps]
    plan = plan_memory(steps, s.buffers, lowered.output_names(), s.removed)
    assert any(p.reused_from for p in plan.buffers)
    assert plan.peak_bytes < plan.peak_bytes_no_reuse
