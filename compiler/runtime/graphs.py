"""CUDA graphs as a compile option (`cuda_graphs=True`): record a compiled graph's
launches once, then replay them with one driver call.

In: a compiled graph (a callable over a flat argument list), which arguments are static
(parameters and buffers, whose storage does not move between calls) and which it
mutates. Out: a callable with the same contract. The first call runs normally (Triton
compiles its kernels then); the second records a CUDA graph over private copies of the
non-static inputs and the static ones in place; every later call copies the non-static
inputs in and replays. As with `torch.compile(mode="reduce-overhead")`, outputs live in
the graph's memory and are overwritten by the next call: clone what you keep.

Training (`GraphPair`, as Inductor's cudagraph trees do for one forward and backward):
the forward and backward graphs of one step record into one private memory pool, in the
order they run; the backward takes the forward's outputs that it reads (the saved
activations, which live in the forward graph's memory) in place, as static inputs, not as
copies; a forward whose previous replay's activations still wait for their backward runs
without replay (a replay would overwrite them), as does a graph that mutates an input it
would only see a private copy of.

A static input that moved, an input on the CPU or a non-tensor argument (a symbolic size)
makes the graph run without replay, and a recording that fails does too; `why_not` says
which, and `status()` gives replays, plain runs and their reasons as data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

MAX_RECORDINGS = 3  # static inputs that keep moving: stop re-recording, run plainly
cuda: Any = torch.cuda  # what records and replays (tests on a CPU host stand in for it)


class GraphPair:
    """The forward and backward graphs of one training step: one memory pool, the
    forward's outputs (by address) for the backward to take in place, and how many
    forward replays still wait for their backward."""

    def __init__(self) -> None:
        self.pool: Any = None  # torch.cuda.graph_pool_handle(), at the first recording
        self.forward_outputs: set[int] = set()  # data_ptr of the forward graph's outputs
        self.pending = 0  # forward replays whose backward has not run


class CudaGraphed:
    def __init__(self, fn: Callable[..., list[Any]], static: Sequence[int] = (),
                 mutated: Sequence[int] = (), pair: GraphPair | None = None,
                 role: str = "inference") -> None:
        self.fn = fn
        self.static = set(static)
        self.mutated = set(mutated)  # inputs the graph writes in place
        self.pair, self.role = pair, role  # role: "forward", "backward" or "inference"
        self.calls = 0
        self.recordings = 0
        self.replays = 0
        self.plain: dict[str, int] = {}  # why a call ran without replay -> how often
        self.graph: Any = None
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.static_ptrs: dict[int, int] = {}
        self.why_not: str | None = None

    def __getattr__(self, name: str) -> Any:  # the CompiledGraph's module, kernels, ...
        return getattr(self.fn, name)

    def status(self) -> dict[str, Any]:
        """Whether this graph replays, and why not where it does not (data for events)."""
        return {"role": self.role, "recorded": self.graph is not None,
                "replays": self.replays, "recordings": self.recordings,
                "why_not": self.why_not, "plain_runs": dict(self.plain)}

    def __call__(self, *args: Any) -> list[Any]:
        pending = self.pair is not None and self.role == "forward" and self.pair.pending > 0
        if self.why_not is None and self.graph is not None and not pending and \
                self._same_statics(args):
            for i, (dst, src) in enumerate(zip(self.inputs, args)):
                if i not in self.static and dst.data_ptr() != src.data_ptr():
                    dst.copy_(src)
            self.graph.replay()
            self.replays += 1
            self._ran(replayed=True)
            return list(self.outputs)
        self.calls += 1
        if pending:
            return self._plainly(args, "the previous forward's saved activations still wait "
                                       "for their backward: a replay would overwrite them")
        if self.why_not is not None or self.calls < 2 or not self._can_record(args):
            return self._plainly(args, self.why_not or "first call (kernels build)")
        return self._record(args)

    def _plainly(self, args: Sequence[Any], why: str) -> list[Any]:
        self.plain[why] = self.plain.get(why, 0) + 1
        out = self.fn(*args)
        self._ran(replayed=False)
        return out

    def _ran(self, replayed: bool) -> None:
        """Count forward replays awaiting their backward (plain runs leave no graph
        memory behind to protect)."""
        if self.pair is None:
            return
        if self.role == "forward" and replayed:
            self.pair.pending += 1
        elif self.role == "backward":
            self.pair.pending = max(0, self.pair.pending - 1)

    def _same_statics(self, args: Sequence[Any]) -> bool:
        return all(args[i].data_ptr() == p for i, p in self.static_ptrs.items())

    def _can_record(self, args: Sequence[Any]) -> bool:
        if not all(isinstance(a, torch.Tensor) for a in args):
            self.why_not = "a non-tensor argument (symbolic size): not recorded"
        elif not all(_on_gpu(a) for a in args):
            self.why_not = "an argument on the CPU: not recorded"
        elif self.recordings >= MAX_RECORDINGS:
            self.why_not = f"static inputs moved {MAX_RECORDINGS} times: not recorded again"
        else:
            self.static |= self._taken_in_place(args)
            copied = sorted(self.mutated - self.static)
            if copied:
                self.why_not = (f"input {copied[0]} is mutated in place but not static: a "
                                "replay would write a private copy of it; not recorded")
        return self.why_not is None

    def _taken_in_place(self, args: Sequence[Any]) -> set[int]:
        """The backward's inputs that are the forward graph's outputs (saved activations
        in the forward's graph memory): static, not copied."""
        if self.pair is None or self.role != "backward":
            return set()
        return {i for i, a in enumerate(args) if a.data_ptr() in self.pair.forward_outputs}

    def _record(self, args: Sequence[Any]) -> list[Any]:
        self.recordings += 1
        inputs = [a if i in self.static else _copy(a) for i, a in enumerate(args)]
        stream = cuda.Stream()
        stream.wait_stream(cuda.current_stream())
        with cuda.stream(stream):  # warm the allocator and caches off the graph
            self.fn(*inputs)
        cuda.current_stream().wait_stream(stream)
        graph = cuda.CUDAGraph()
        pool = self._pool()
        try:
            with cuda.graph(graph, pool=pool):
                outputs = self.fn(*inputs)
        except Exception as e:  # noqa: BLE001 - an op that cannot be captured: run plainly
            self.why_not = f"recording failed: {type(e).__name__}: {e}"[:200]
            cuda.synchronize()
            return self._plainly(args, self.why_not)
        self.graph, self.inputs, self.outputs = graph, inputs, list(outputs)
        self.static_ptrs = {i: args[i].data_ptr() for i in self.static}
        if self.pair is not None and self.role == "forward":
            self.pair.forward_outputs = {o.data_ptr() for o in self.outputs
                                         if isinstance(o, torch.Tensor)}
        graph.replay()
        self.replays += 1
        self._ran(replayed=True)
        return list(self.outputs)

    def _pool(self) -> Any:
        """The pair's shared memory pool (None: the graph's own)."""
        if self.pair is None:
            return None
        if self.pair.pool is None:
            self.pair.pool = cuda.graph_pool_handle()
        return self.pair.pool


def _on_gpu(t: torch.Tensor) -> bool:
    return t.is_cuda


def _copy(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def static_input_indices() -> list[int]:
    """The parameters and buffers among the graph's inputs, as AOTAutograd marked them
    for the graph being compiled now (empty when there is no tracing context)."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    return list(getattr(meta, "static_input_indices", None) or [])
