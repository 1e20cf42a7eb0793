"""DDP's gradient buckets as graph boundaries: which bucket a graph Dynamo hands the backend
is, when DDPOptimizer split the step's graph.

Under `DistributedDataParallel`, Dynamo's DDPOptimizer (torch/_dynamo/backends/distributed.py)
cuts the captured graph where DDP's gradient buckets end, so that each bucket's all-reduce
can start while the backward of the graphs before it still runs, and hands the backend one
graph per bucket (`submod_0`, `submod_1`, ...). It marks each with a compile reason and
keeps its buckets (sizes, parameter names) on itself; both are read here while the
backend is being handed the graph (DDPOptimizer and its submodule compiler are on the call
stack then). In: the handed graph module. Out: a `BucketSplit` (or None: not a DDP split).
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass
from types import FrameType
from typing import Any

import torch.fx

MAX_PARAMS = 64  # parameter names kept per bucket


@dataclass(frozen=True)
class BucketSplit:
    by: str  # who split the graph ("DDPOptimizer")
    index: int  # this graph's bucket, in the order the forward runs them
    count: int  # buckets (graphs) the step was split into
    bucket_bytes: int  # parameter bytes in this bucket
    bucket_cap: int  # DDP's bucket_cap_mb, in bytes
    params: tuple[str, ...]
    reason: str

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "params": list(self.params)}


def _split_reason(gm: torch.fx.GraphModule) -> bool:
    reason = getattr(gm, "compile_subgraph_reason", None)
    return "DDPOptimizer" in str(getattr(reason, "reason", ""))


def ddp_bucket(gm: torch.fx.GraphModule) -> BucketSplit | None:
    """The DDP bucket `gm` is, read from DDPOptimizer on the call stack (None if none)."""
    if not _split_reason(gm):
        return None
    from torch._dynamo.backends.distributed import DDPOptimizer, SubmodCompiler

    target = optimizer = None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and optimizer is None:
        me = frame.f_locals.get("self")
        node = frame.f_locals.get("n")
        if target is None and isinstance(me, SubmodCompiler) and node is not None:
            target = str(node.target)
        if isinstance(me, DDPOptimizer):
            optimizer = me
        frame = frame.f_back
    buckets = getattr(optimizer, "buckets", None)
    if optimizer is None or not buckets or target is None or not target.startswith("submod_"):
        return None
    index = int(target.removeprefix("submod_"))
    bucket = buckets[index]
    cap = int(optimizer.bucket_bytes_cap)
    return BucketSplit(
        "DDPOptimizer", index, len(buckets), int(bucket.size), cap,
        tuple(bucket.params[:MAX_PARAMS]),
        f"DDP gradient bucket {index + 1} of {len(buckets)} ({_mb(bucket.size)} of parameters,"
        f" bucket cap {_mb(cap)}): DDPOptimizer ends a graph at each bucket, so that "
        "bucket's all-reduce can start while the backward of the graphs before it runs")


def _mb(n: int) -> str:
    return f"{n / 2**20:.2f} MB"
