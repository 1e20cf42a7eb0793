"""CUDA graphs as a compile option (`cuda_graphs=True`): record a compiled graph's
launches once, then replay them with one driver call.

In: a compiled graph (a callable over a flat argument list) and which arguments are
static (parameters and buffers, whose storage does not move between calls). Out: a
callable with the same contract. The first call runs normally (Triton compiles its
kernels then); the second records a CUDA graph over private copies of the non-static
inputs and the static ones in place; every later call copies the non-static inputs in
and replays. As with `torch.compile(mode="reduce-overhead")`, outputs live in the graph's
memory and are overwritten by the next call: clone what you keep. A static input that
moved, an input on the CPU or a non-tensor argument (a symbolic size) makes the graph
run without replay, and a recording that fails does too; `why_not` says which.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

MAX_RECORDINGS = 3  # static inputs that keep moving: stop re-recording, run plainly


class CudaGraphed:
    def __init__(self, fn: Callable[..., list[Any]], static: Sequence[int] = ()) -> None:
        self.fn = fn
        self.static = set(static)
        self.calls = 0
        self.recordings = 0
        self.graph: Any = None
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.static_ptrs: dict[int, int] = {}
        self.why_not: str | None = None

    def __getattr__(self, name: str) -> Any:  # the CompiledGraph's module, kernels, ...
        return getattr(self.fn, name)

    def __call__(self, *args: Any) -> list[Any]:
        if self.why_not is None and self.graph is not None and self._same_statics(args):
            for i, (dst, src) in enumerate(zip(self.inputs, args)):
                if i not in self.static and dst.data_ptr() != src.data_ptr():
                    dst.copy_(src)
            self.graph.replay()
            return list(self.outputs)
        self.calls += 1
        if self.why_not is not None or self.calls < 2 or not self._can_record(args):
            return self.fn(*args)
        return self._record(args)

    def _same_statics(self, args: Sequence[Any]) -> bool:
        return all(args[i].data_ptr() == p for i, p in self.static_ptrs.items())

    def _can_record(self, args: Sequence[Any]) -> bool:
        if not all(isinstance(a, torch.Tensor) for a in args):
            self.why_not = "a non-tensor argument (symbolic size): not recorded"
        elif not all(a.is_cuda for a in args):
            self.why_not = "an argument on the CPU: not recorded"
        elif self.recordings >= MAX_RECORDINGS:
            self.why_not = f"static inputs moved {MAX_RECORDINGS} times: not recorded again"
        return self.why_not is None

    def _record(self, args: Sequence[Any]) -> list[Any]:
        self.recordings += 1
        inputs = [a if i in self.static else _copy(a) for i, a in enumerate(args)]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm the allocator and caches off the graph
            self.fn(*inputs)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                outputs = self.fn(*inputs)
        except Exception as e:  # noqa: BLE001 - an op that cannot be captured: run plainly
            self.why_not = f"recording failed: {type(e).__name__}: {e}"[:200]
            torch.cuda.synchronize()
            return self.fn(*args)
        self.graph, self.inputs, self.outputs = graph, inputs, list(outputs)
        self.static_ptrs = {i: args[i].data_ptr() for i in self.static}
        graph.replay()
        return list(self.outputs)


def _copy(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def static_input_indices() -> list[int]:
    """The parameters and buffers among the graph's inputs, as AOTAutograd marked them
    for the graph being compiled now (empty when there is no tracing context)."""
    from torch._guards import TracingContext

    ctx = TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    return list(getattr(meta, "static_input_indices", None) or [])
