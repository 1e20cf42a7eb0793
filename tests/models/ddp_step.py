"""One DDP training step on 2 gloo processes, three ways (float64 eager, float32 eager,
float32 compiled), judged by the training suite's rule; run by test_ddp.py in a subprocess.

    python tests/distributed/ddp_step.py MODEL BACKEND OUT.json   (MODEL: mlp | conv)

Each rank writes nothing; rank 0 writes OUT.json: the judgement rows of rank 0's gradients
and parameters after one AdamW step, the number of graphs Dynamo handed the backend, and
the number of ATen forward graphs Kernelscope compiled (from its trace directory).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from training_suite import LR, judge  # noqa: E402


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class Mlp(nn.Module):
    """A 3-block MLP-transformer of about 3 MB: 1 MB buckets split it into 4 graphs."""

    def __init__(self, d: int = 256) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(3)])
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x).mean(1))


class Conv(nn.Module):
    """A 4-layer convnet with batch norm of about 4 MB: 1 MB buckets split it into 4 or more."""

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for cin, cout, stride in ((3, 64, 1), (64, 128, 2), (128, 256, 2), (256, 256, 1)):
            layers += [nn.Conv2d(cin, cout, 3, stride=stride, padding=1),
                       nn.BatchNorm2d(cout), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x).mean((2, 3)))


def inputs(model: str, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn((4, 8, 256) if model == "mlp" else (4, 3, 16, 16), generator=g)
    return x, torch.randint(0, 10, (4,), generator=g)


# DDP's own first bucket is 1 MB, and DDPOptimizer wants no later bucket smaller.
BUCKET_MB = {"mlp": 1.0, "conv": 1.0}


def step(base: nn.Module, dtype: torch.dtype, backend: Any, x: torch.Tensor,
         y: torch.Tensor, bucket_mb: float) -> dict[str, torch.Tensor]:
    model = copy.deepcopy(base).to(dtype)
    ddp = DDP(model, bucket_cap_mb=bucket_mb)

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        return loss.detach()

    run = fn if backend is None else torch.compile(fn, backend=backend)
    loss = run(x.to(dtype), y)
    out = {"loss": loss.double()}
    out.update({f"grad:{n}": p.grad.double() for n, p in model.named_parameters()})
    torch.optim.AdamW(model.parameters(), lr=LR).step()
    out.update({f"param:{n}": p.detach().double() for n, p in model.named_parameters()})
    return out


def worker(rank: int, model: str, backend_name: str, out: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    base = Mlp() if model == "mlp" else Conv()
    x, y = inputs(model, rank)
    handed = 0
    trace_dir = tempfile.mkdtemp(prefix=f"ks-ddp-{rank}-")
    if backend_name == "kernelscope":
        from kernelscope.compiler import backend as ours

        def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            nonlocal handed
            handed += 1
            return ours(gm, example_inputs, options={"trace_dir": trace_dir})
    else:
        def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
            nonlocal handed
            handed += 1
            return torch._dynamo.backends.registry.lookup_backend(backend_name)(
                gm, example_inputs)

    mb = BUCKET_MB[model]
    ref = step(base, torch.float64, None, x, y, mb)
    eager = step(base, torch.float32, None, x, y, mb)
    torch._dynamo.reset()
    ours_out = step(base, torch.float32, backend, x, y, mb)
    if rank == 0:
        records = [json.loads(p.read_text()) for p in Path(trace_dir).glob("*.json")]
        kinds = [r.get("kind") or r.get("graph", {}).get("kind") for r in records]
        Path(out).write_text(json.dumps({
            "rows": judge(eager, ours_out, ref), "handed": handed,
            "records": len(records), "kinds": kinds}, default=float))
    dist.destroy_process_group()


if __name__ == "__main__":
    model_, backend_, out_ = sys.argv[1:4]
    port_ = int(os.environ.get("KS_DDP_PORT", "29531"))
    mp.spawn(worker, args=(model_, backend_, out_, port_), nprocs=2)
