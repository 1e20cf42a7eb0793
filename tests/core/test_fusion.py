"""Fusion decisions: what the seeds promise, and refusals that say why."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from ks_helpers import compiled, lower_fn

from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.ir.opnames import op_short
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.scheduler import Schedule, schedule

TRITON = choose_backend("triton", "cpu", CompileOptions())


def sched(fn: Callable[..., Any], *args: Any, fusion: bool = True) -> Schedule:
    (gm, lowered), = lower_fn(fn, *args)
    op_names = {n.name: op_short(n.target) for n in gm.graph.nodes if n.op == "call_function"}
    return schedule(lowered, TRITON, fusion=fusion, op_names=op_names)


def kernels(s: Schedule) -> list[str]:
    return [st.name for st in s.steps if st.kind != "extern"]


def test_add_relu_cos_sin_gelu_are_one_kernel_each() -> None:
    x = torch.randn(1024)
    gelu = lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2 / math.pi)  # noqa: E731
                                                 * (x + 0.044715 * x * x * x)))
    assert kernels(sched(lambda a, b: (a + b).relu(), x, x)) == ["triton_poi_fused_add_relu_0"]
    assert kernels(sched(lambda a: torch.sin(torch.cos(a)), x)) == \
        ["triton_poi_fused_cos_sin_0"]
    assert len(kernels(sched(gelu, x))) == 1


def test_softmax_is_one_kernel_and_keeps_its_statistics_in_registers() -> None:
    s = sched(lambda x: torch.softmax(x, -1), torch.randn(32, 100))
    assert len(s.steps) == 1
    (step,) = s.steps
    assert step.kind is KernelKind.REDUCTION and step.plan is not None
    assert len(step.plan.stores) == 1  # amax and sum never reach memory
    assert len(s.removed) >= 2
    assert any(d.fused and d.kind == "vertical" for d in s.decisions)


def test_hand_written_layer_norm_is_one_kernel() -> None:
    """mean and var read the row in one reduction kernel and the normalisation is its
    epilogue: one kernel, whose only store is the output."""
    def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + 1e-5) * w + b

    s = sched(layer_norm, torch.randn(16, 64), torch.randn(64), torch.randn(64))
    assert len(kernels(s)) == 1
    (step,) = s.steps
    assert step.kind is KernelKind.REDUCTION and step.plan is not None
    assert len(step.plan.stores) == 1  # mean and var stay in registers


def test_rmsnorm_fuses_prologue_reduction_and_epilogue() -> None:
    s = sched(lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
              torch.randn(8, 32), torch.randn(32))
    assert len(kernels(s)) == 1


def test_fusion_off_refuses_with_a_reason() -> None:
    s = sched(lambda x: torch.softmax(x, -1), torch.randn(4, 10), fusion=False)
    assert len(s.steps) >= 3
    assert s.decisions and all(not d.fused for d in s.decisions)
    assert all(d.reason == "fusion is turned off" for d in s.decisions)


def test_extern_matmul_is_never_fused_and_says_so() -> None:
    s = sched(lambda x, w: torch.relu(x @ w) + x.sum(), torch.randn(8, 8), torch.randn(8, 8))
    refused = [d for d in s.decisions if not d.fused]
    assert any("extern call" in d.reason for d in refused)


def test_reading_a_reduction_at_another_row_is_refused() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        s = x.sum(1)
        return torch.cat([s[1:], s[:1]]) * 2  # row i reads the sum of row i + 1

    s = sched(fn, torch.randn(8, 16))
    refused = [d for d in s.decisions if not d.fused]
    assert any("at another row" in d.reason for d in refused), [d.reason for d in s.decisions]


def test_different_sizes_are_refused_with_sizes_named() -> None:
    s = sched(lambda x, y: (x.exp(), y.exp() + x.sum()), torch.randn(10), torch.randn(7))
    reasons = [d.reason for d in s.decisions if not d.fused]
    assert any("different sizes" in r or "fit neither" in r for r in reasons), reasons


def test_a_reduction_over_one_element_keeps_its_own_rows() -> None:
    """A sum over a size-1 dim is a 6x1 reduction: it was fused into a 2x3 one as if its
    6 outputs were that kernel's inputs, and wrote 2 of them (group_norm's backward)."""
    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = x * y
        return a.sum(2), a.sum(0)

    x, y = torch.randn(1, 2, 3), torch.randn(1, 2, 3)
    s = sched(fn, x, y)
    refused = [d.reason for d in s.decisions if not d.fused]
    assert any("different reductions: 2x3 vs 6x1" in r or "6x1 vs 2x3" in r
               for r in refused), [d.reason for d in s.decisions]
    got = compiled(fn, backend="cpp")(x, y)
    for g, e in zip(got, fn(x, y)):
        torch.testing.assert_close(g, e)


def test_long_reduction_with_one_output_splits_in_two_passes_for_triton() -> None:
    (gm, lowered), = lower_fn(lambda x: x.sum(), torch.randn(1 << 16))
    reasons = [b.realized for b in lowered.buffers if hasattr(b, "realized")]
    assert reasons == ["split reduction: 65536 = 16 x 4096 (pass 1 of 2)",
                       "split reduction: 65536 = 16 x 4096 (pass 2 of 2)"]


def test_layer_norm_over_a_3d_input_is_one_kernel() -> None:
    # GPT-2's and BERT's layer norms over [batch, tokens, 768]: the normalising pass reads
    # the statistics through a view ((768*i0 + i1) // 768 with i1 < 768 is row i0). It was a
    # second kernel (24 extra launches in GPT-2 small) before the index was simplified with
    # the loop bounds.
    # the view comes from the linear layer that reads the result as [128, 768].
    ln = torch.nn.LayerNorm(768).requires_grad_(False)
    w = torch.randn(768, 768)
    s = sched(lambda x: ln(x) @ w, torch.randn(2, 64, 768))
    assert len(kernels(s)) == 1, kernels(s)
    refused = [d for d in s.decisions if not d.fused and "another row" in d.reason]
    assert not refused, refused[0].reason


def test_a_scalar_used_twice_is_recomputed_in_its_consumer_not_a_kernel_of_its_own() -> None:
    """A one-element value of a few ops read by a larger kernel (AdamW's bias correction,
    lerp's `abs(weight) >= 0.5`) cannot fuse with it ("different sizes"); stored, it took
    a one-element kernel of its own. Recomputed in the consumer: one kernel, eager's
    values. A scalar of many ops is still stored once."""
    x, s = torch.randn(256, 64), torch.tensor(0.3)

    def small(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        c = (1 - 0.9 ** (s * 2 + 1)).abs()
        return x * c + c

    assert len(kernels(sched(small, x, s))) == 1
    check = compiled(small)
    torch.testing.assert_close(check(x, s), small(x, s))

    def big(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        c = s
        for i in range(40):  # 80 ops: stored, not recomputed per element
            c = torch.sin(c) + i
        return x * c + c

    assert len(kernels(sched(big, x, s))) == 2


def test_adamw_step_takes_no_one_element_kernel_beside_the_step_counts() -> None:
    model = torch.nn.Linear(16, 8)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for p in model.parameters():
        p.grad = torch.randn_like(p)

    def step() -> None:
        opt.step()

    (gm, lowered), = lower_fn(step)
    s = schedule(lowered, TRITON, fusion=True, op_names={})
    names = [st.name for st in s.steps if st.kind != "extern"]
    # Per parameter: its update, and its step count (a graph output of one element).
    assert len(names) == 4, names



def test_a_random_scalar_recomputed_in_two_consumers_is_one_value() -> None:
    """The scalar rule recomputes `torch.rand(()) * 2 + 1` in each consumer: its random
    bits come from the seed and the producer's index (0), so both outputs and every
    element see one value, as in eager."""
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r = torch.rand(()) * 2 + 1
        return x * r, x + r

    a, b = compiled(f)(torch.ones(64, 8))
    r = a[0, 0].item()
    assert 1.0 <= r < 3.0
    assert bool((a == r).all()) and bool((b == b[0, 0]).all())
    assert abs((b[0, 0].item() - 1) - r) < 1e-6
