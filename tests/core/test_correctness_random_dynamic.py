"""Random ops (deterministic per seed, statistically right, marked as not bit-comparable) and
dynamic shapes (compiled per concrete size with a note, never a failure)."""

from __future__ import annotations

import torch
from ks_helpers import compiled, lower_fn

N = 200_000


def _dropout(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.dropout(x, 0.3, training=True) * 1.0


def test_dropout_rate_and_scale() -> None:
    out = compiled(_dropout)(torch.ones(N))
    dropped = (out == 0).double().mean().item()
    assert abs(dropped - 0.3) < 0.01, dropped
    kept = out[out != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / 0.7))


def test_random_moments() -> None:
    fn = compiled(lambda x: (torch.rand_like(x), torch.randn_like(x), torch.bernoulli(x)))
    u, n, b = fn(torch.full((N,), 0.25))
    assert abs(u.mean().item() - 0.5) < 0.01 and abs(u.var().item() - 1 / 12) < 0.005
    assert abs(n.mean().item()) < 0.02 and abs(n.var().item() - 1) < 0.02
    assert abs(b.mean().item() - 0.25) < 0.01 and set(b.unique().tolist()) <= {0.0, 1.0}


def test_random_deterministic_per_seed() -> None:
    fn = compiled(_dropout)
    x = torch.ones(1000)
    torch.manual_seed(7)
    a = fn(x)
    torch.manual_seed(7)
    b = fn(x)
    torch.manual_seed(8)
    c = fn(x)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_random_ops_are_marked_not_bit_comparable() -> None:
    (gm, graph), = lower_fn(lambda x: torch.rand_like(x) + x, torch.ones(8))
    assert any("not bit-comparable" in n for n in graph.notes), graph.notes
    assert any(f.op.startswith("aten.rand_like") for f in graph.fallbacks)


def test_in_place_random_ops_are_marked_not_bit_comparable() -> None:
    # functionalization turns x.normal_() into normal_functional: a random op too
    (gm, graph), = lower_fn(lambda x: x.clone().normal_() + x, torch.ones(8))
    assert any("not bit-comparable" in n for n in graph.notes), graph.notes


def test_dynamic_shapes_compile_per_size() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x * 2 + y).softmax(-1).sum(0)

    from kernelscope.compiler import backend

    torch._dynamo.reset()

    fn = torch.compile(f, backend=backend, dynamic=True)
    for n in (3, 5, 9):
        x, y = torch.randn(n, 4), torch.randn(4)
        torch.testing.assert_close(fn(x, y), f(x, y))


def test_dynamic_size_used_as_a_value() -> None:
    from kernelscope.compiler import backend

    torch._dynamo.reset()

    def f(x: torch.Tensor) -> torch.Tensor:
        return x[: x.shape[0] // 2].relu() * x.shape[1]

    fn = torch.compile(f, backend=backend, dynamic=True)
    for n in (4, 6, 10):
        x = torch.randn(n, 3)
        torch.testing.assert_close(fn(x), f(x))
