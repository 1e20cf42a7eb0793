"""CUDA graphs for training (runtime/graphs.py GraphPair), with stand-ins for torch.cuda's
recording on this CPU host: which inputs a backward takes in place, one memory pool for a
forward and its backward, and the calls that must not replay, with their reasons."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from kernelscope.compiler.runtime import graphs


class FakeCuda:
    """torch.cuda as far as CudaGraphed uses it: streams that do nothing, graphs that count
    replays, and the pools each recording was given."""

    def __init__(self) -> None:
        self.pools: list[Any] = []
        self.handles = 0

    class Stream:
        def wait_stream(self, other: Any) -> None:
            pass

    class CUDAGraph:
        def __init__(self) -> None:
            self.replays = 0

        def replay(self) -> None:
            self.replays += 1

    def current_stream(self) -> Any:
        return FakeCuda.Stream()

    @contextlib.contextmanager
    def stream(self, s: Any) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def graph(self, g: Any, pool: Any = None) -> Iterator[None]:
        self.pools.append(pool)
        yield

    def graph_pool_handle(self) -> Any:
        self.handles += 1
        return ("pool", self.handles)

    def synchronize(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    cuda = FakeCuda()
    monkeypatch.setattr(graphs, "cuda", cuda)
    monkeypatch.setattr(graphs, "_on_gpu", lambda t: True)
    return cuda


def _pair() -> tuple[graphs.CudaGraphed, graphs.CudaGraphed, torch.Tensor, list[int]]:
    weight = torch.ones(4)
    saved = torch.zeros(4)  # the forward's graph output the backward reads
    copies: list[int] = []

    def forward(w: torch.Tensor, x: torch.Tensor) -> list[Any]:
        return [saved, (w * x).sum()]

    def backward(act: torch.Tensor, grad: torch.Tensor) -> list[Any]:
        copies.append(act.data_ptr())
        return [act * grad]

    pair = graphs.GraphPair()
    fw = graphs.CudaGraphed(forward, static=[0], pair=pair, role="forward")
    bw = graphs.CudaGraphed(backward, static=[], pair=pair, role="backward")
    return fw, bw, weight, copies


def test_forward_and_backward_share_one_pool_and_saved_activations_are_not_copied(
        fake: FakeCuda) -> None:
    fw, bw, weight, seen = _pair()
    x, g = torch.ones(4), torch.ones(())
    for _ in range(4):
        act, _loss = fw(weight, x)
        bw(act, g)
    assert fw.status()["recorded"] and bw.status()["recorded"]
    assert fw.replays == 3 and bw.replays == 3  # calls 2-4 (call 1 builds the kernels)
    assert fake.pools == [("pool", 1), ("pool", 1)] and fake.handles == 1
    assert 0 in bw.static  # the saved activation, taken where the forward's graph keeps it
    assert bw.inputs[0] is act and bw.inputs[1] is not g  # the gradient is a private copy
    assert fw.pair is not None and fw.pair.pending == 0


def test_a_second_forward_before_its_backward_runs_without_replay(fake: FakeCuda) -> None:
    fw, bw, weight, _ = _pair()
    x, g = torch.ones(4), torch.ones(())
    for _ in range(2):
        act, _ = fw(weight, x)
        bw(act, g)
    fw(weight, x)  # replayed: its activations now wait for a backward
    fw(weight, x)  # gradient accumulation: a replay would overwrite them
    why = next(iter(k for k in fw.status()["plain_runs"] if "wait" in k))
    assert fw.status()["plain_runs"][why] == 1 and "saved activations" in why


def test_a_mutated_input_that_is_not_static_is_never_recorded(fake: FakeCuda) -> None:
    def step(state: torch.Tensor) -> list[Any]:
        state.add_(1)
        return [state]

    g = graphs.CudaGraphed(step, static=[], mutated=[0])
    state = torch.zeros(2)
    for _ in range(3):
        g(state)
    assert g.graph is None and "mutated in place" in (g.why_not or "")
    assert torch.equal(state, torch.full((2,), 3.0))  # every call wrote the caller's tensor


def test_the_run_event_says_whether_each_graph_replays_and_why_not(
        fake: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from kernelscope.compiler import pipeline
    from kernelscope.compiler.options import CompileOptions

    monkeypatch.setattr(pipeline, "is_gpu", lambda device: True)

    def plain(x: torch.Tensor) -> list[Any]:
        return [x + 1]

    def mutating(x: torch.Tensor) -> list[Any]:
        return [x.add_(1)]

    on = CompileOptions(cuda_graphs=True)
    works = [SimpleNamespace(compiled=fn, mutations=muts, example_inputs=[torch.ones(2)],
                             backend=SimpleNamespace(device="cuda"))
             for fn, muts in ((plain, {}), (mutating, {0: 0}))]
    replays, never = (pipeline._cuda_graph(w, on) for w in works)  # type: ignore[arg-type]
    assert replays is not None and replays.recorded and replays.replays == 2
    assert replays.plain_runs == {"first call (kernels build)": 1}
    assert never is not None and not never.recorded and "mutated" in (never.why_not or "")
    assert pipeline._cuda_graph(works[0], CompileOptions()) is None  # type: ignore[arg-type]
