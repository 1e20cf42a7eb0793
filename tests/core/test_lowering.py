"""Lowering, checked through the reference interpreter against eager PyTorch."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from ks_helpers import assert_same, lower_fn, reference

from kernelscope.compiler.ir.nodes import ComputedBuffer, ExternKernel, Reduction

CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
    "add_relu": (lambda x, y: (x + y).relu(), lambda: (torch.randn(64, 32), torch.randn(32))),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi)
                                                      * (x + 0.044715 * x ** 3))),
                  lambda: (torch.randn(1000),)),
    "softmax": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(16, 100),)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (40,), w, b),
                   lambda: (torch.randn(8, 40), torch.randn(40), torch.randn(40))),
    "var_mean": (lambda x: torch.var_mean(x, dim=0, correction=1),
                 lambda: (torch.randn(30, 7),)),
    "views": (lambda x: x.t().reshape(6, 20)[1:5, ::2].unsqueeze(0) * 2,
              lambda: (torch.randn(20, 6),)),
    "expand_select": (lambda x, y: x[:, 2].unsqueeze(1).expand(5, 4) + y,
                      lambda: (torch.randn(5, 3), torch.randn(5, 4))),
    "cat_pad": (lambda x, y: F.pad(torch.cat([x, y], 0), (1, 1, 0, 2), value=-1.0),
                lambda: (torch.randn(3, 4), torch.randn(2, 4))),
    # every part of a cat is read only inside its own segment (the interpreter's loads
    # are bounds-checked: before, the last part was read at negative offsets)
    "cat_three": (lambda x, y, z: torch.cat([x, y, z], 1) * 2,
                  lambda: (torch.randn(3, 4), torch.randn(3, 2), torch.randn(3, 5))),
    "gather_index": (lambda x, i: x.gather(1, i) + x[i[:, 0]].sum(1, keepdim=True),
                     lambda: (torch.randn(6, 5), torch.randint(0, 5, (6, 3)))),
    "embedding": (lambda w, i: F.embedding(i, w), lambda: (torch.randn(10, 4),
                                                           torch.randint(0, 10, (3, 2)))),
    "argmax_amin": (lambda x: (x.argmax(1), x.amin(0)), lambda: (torch.randn(7, 9),)),
    "where_int": (lambda x: torch.where(x > 0, x, 0).to(torch.int32) + 1,
                  lambda: (torch.randn(50) * 10,)),
    "arange_full": (lambda x: x + torch.arange(8) + torch.full((8,), 2.5),
                    lambda: (torch.randn(8),)),
    "mm_bias": (lambda x, w, b: F.linear(x, w, b).relu(),
                lambda: (torch.randn(4, 8), torch.randn(6, 8), torch.randn(6))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreted_ir_matches_eager(name: str) -> None:
    fn, make = CASES[name]
    args = make()
    eager, ref = reference(fn, args)
    assert_same(lower_fn(fn, *args, interpret=True), eager, ref)


def test_pointwise_chain_is_one_buffer_with_origins() -> None:
    (_, lowered), = lower_fn(lambda x, y: torch.sin(torch.cos(x + y)), torch.randn(8),
                             torch.randn(8))
    computed = [b for b in lowered.buffers if isinstance(b, ComputedBuffer)]
    assert len(computed) == 1
    assert computed[0].origins == {"add", "cos", "sin"}
    assert computed[0].realized == "graph output"


def test_reductions_are_realized_and_prologues_inlined() -> None:
    (_, lowered), = lower_fn(lambda x: (x * 2).exp().sum(1), torch.randn(4, 6))
    (buf,) = [b for b in lowered.buffers if isinstance(b, ComputedBuffer)]
    assert isinstance(buf.data, Reduction)
    assert buf.data.reduction_type == "sum"
    assert {"mul", "exp", "sum_1"} == buf.origins


def test_multi_use_value_is_realized_with_reason() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.exp(x) * 3
        return y.sum(), y.amax()

    (_, lowered), = lower_fn(fn, torch.randn(16))
    reasons = [b.realized for b in lowered.buffers if isinstance(b, ComputedBuffer)]
    assert "used by 2 consumers" in reasons


def test_unlowered_op_falls_back_to_aten() -> None:
    (_, lowered), = lower_fn(lambda x: torch.linalg.qr(x)[0] * 2, torch.randn(3, 3))
    assert [f.op for f in lowered.fallbacks] == ["aten.linalg_qr.default"]
    externs = [b for b in lowered.buffers if isinstance(b, ExternKernel)]
    assert externs and externs[0].fallback


def test_op_use_memo_gives_what_running_each_body_gives() -> None:
    """The lowering's memo of op uses (per body and arguments) answers as running the body
    does, for chains through views, reductions and pooling windows (whose ops depend on
    whether a coordinate is a constant)."""
    from kernelscope.compiler.ir.handlers import OpUseMemo, op_uses

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = F.max_pool2d(x.sin() * 2, 3, stride=2, padding=1)
        # a 1x1 window result broadcast: its body runs at constant coordinates there
        z = F.max_pool2d(x[:, :, :1, :1].cos(), 3, stride=1, padding=1)
        return y.reshape(2, -1).cos() + x.mean() + (x + z)[:, :, :4, :4].reshape(2, -1)

    (_, lowered), = lower_fn(fn, torch.randn(2, 3, 8, 8))
    dtypes = {b.name: b.dtype for b in [*lowered.inputs, *lowered.buffers]}
    bodies = [b.data for b in lowered.buffers if isinstance(b, ComputedBuffer) and b.data]
    memo: OpUseMemo = {}
    for _ in range(2):  # the second round answers from the memo
        for body in bodies:
            assert op_uses(body, dtypes.__getitem__, memo) == \
                op_uses(body, dtypes.__getitem__)
    assert memo and len(bodies) >= 2


def test_op_use_memo_tells_arguments_apart() -> None:
    """A body whose ops depend on its arguments (pooling windows at constant coordinates
    build no mask) is remembered per argument, not once per body."""
    import sympy

    from kernelscope.compiler.ir.handlers import OpUseMemo, op_uses
    from kernelscope.compiler.ir.nodes import Pointwise
    from kernelscope.compiler.ir.ops import ops, with_origin

    def inner(idx: Any) -> Any:
        x = ops.load("x", idx[0])
        return ops.sin(x) if idx[0].is_Integer else ops.cos(x)

    producer = with_origin(inner, "p")
    at_zero = Pointwise("cpu", torch.float32,
                        with_origin(lambda idx: producer([sympy.Integer(0)]), "c"), (4,))
    anywhere = Pointwise("cpu", torch.float32, producer, (4,))
    memo: OpUseMemo = {}
    dtype_of = {"x": torch.float32}.__getitem__
    assert op_uses(anywhere, dtype_of, memo) == [("cos", torch.float32)]
    assert op_uses(at_zero, dtype_of, memo) == [("sin", torch.float32)]
    assert op_uses(anywhere, dtype_of, memo) == [("cos", torch.float32)]


def test_small_max_pools_are_one_pointwise_chain_and_match_eager() -> None:
    """A 3x3 max pool is a chain over its 9 elements, not two window reductions (ResNet-50's
    stem pool took 1.96 ms on the H200 as reductions); eager's rules hold: the first
    maximum, the last NaN, never the padding, the index of an all -inf window."""
    x = torch.randn(2, 3, 9, 9)
    x[0, 0, 1, 1] = x[0, 0, 2, 2] = float("nan")
    x[1, 1, :3, :3] = float("-inf")

    def fn(x: torch.Tensor) -> Any:
        return F.max_pool2d(x, 3, 2, 1, return_indices=True)

    (_, lowered), = lower_fn(fn, x)
    assert not [b for b in lowered.buffers if isinstance(b, ComputedBuffer)
                and isinstance(b.data, Reduction)]
    assert_same(lower_fn(fn, x, interpret=True), fn(x))
    (_, big), = lower_fn(lambda x: F.max_pool2d(x, 6), torch.randn(1, 2, 12, 12))
    assert [b for b in big.buffers if isinstance(b, ComputedBuffer)
            and isinstance(b.data, Reduction)]  # 36 elements: the window reductions
