"""The compiled optimizer step: AdamW over a whole model, eager / Inductor / Kernelscope.

    python -m benchmarks.optimizer --models gpt2_small,resnet50 --json OUT/opt.json
    python -m benchmarks.optimizer --device cpu --size smoke   # a check, seconds

Each column steps its own copy of the model (the same weights, the same gradients) with
`torch.optim.AdamW(foreach=False)` compiled as `torch.compile(opt.step)`; Kernelscope
runs with its combo kernels (schedule/horizontal.py) on and off. Per column: the worst
parameter difference from eager after one step, the median ms per step, and the CUDA
kernels launched per step (the profiler's count; None on the CPU, where the generated
kernels are counted from the compile's trace instead).
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks import training as train_table
from benchmarks.timing import count_kernels, median_ms


def _columns() -> list[tuple[str, Callable[[Any, str], Any]]]:
    def ks(combos: bool) -> Callable[[Any, str], Any]:
        def make(step: Any, trace: str) -> Any:
            return torch.compile(step, backend="kernelscope",
                                 options={"combo_kernels": combos, "trace_dir": trace})
        return make

    return [("eager", lambda step, _t: step),
            ("inductor", lambda step, _t: torch.compile(step)),
            ("kernelscope", ks(True)),
            ("kernelscope_no_combo", ks(False))]


def _generated(trace: Path) -> int:
    """Generated kernels (combo kernels counted once) over every compile in `trace`."""
    n = 0
    for f in trace.glob("*.json"):
        stages = json.loads(f.read_text()).get("stages", {})
        n += sum(1 for k in stages.get("scheduling", {}).get("kernels", [])
                 if k["kind"] != "extern")
    return n


def measure(entry: train_table.TrainModel, device: str, smoke: bool) -> dict[str, Any]:
    torch.manual_seed(0)
    model, _batch, _loss = entry.make(device, smoke)
    grads = [torch.randn_like(p) * 1e-2 for p in model.parameters()]
    row: dict[str, Any] = {"model": entry.name, "params": len(grads)}
    ref: list[torch.Tensor] = []
    for label, wrap in _columns():
        torch._dynamo.reset()
        mine = copy.deepcopy(model)
        params = list(mine.parameters())
        for p, g in zip(params, grads):
            p.grad = g.clone()
        opt = torch.optim.AdamW(params, lr=1e-3, foreach=False)
        with tempfile.TemporaryDirectory() as trace:
            step = wrap(lambda opt=opt: opt.step(), trace)
            step()
            worst = max(((a - b).abs().max().item() for a, b in zip(params, ref)),
                        default=0.0)
            if label == "eager":
                ref = [p.detach().clone() for p in params]
            cell = {"max_abs_diff": worst, "ms": round(median_ms(step, device), 4),
                    "cuda_kernels": count_kernels(step, device)}
            if label.startswith("kernelscope"):
                cell["generated_kernels"] = _generated(Path(trace))
        row[label] = cell
        print(entry.name, label, cell, flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=None, help="comma-separated training models")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--size", choices=["full", "smoke"], default="full")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    names = args.models.split(",") if args.models else None
    rows: list[dict[str, Any]] = []
    for m in train_table.by_name(names):
        rows.append(measure(m, args.device, args.size == "smoke"))
        if args.json:  # after every model: a run cut short keeps what it measured
            Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
