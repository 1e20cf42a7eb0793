"""Where the time goes: eager, Inductor and Kernelscope per model or suite case, one process.

    python -m benchmarks.profile --models bert_base,vit_b_16 --cases basic_block --json OUT/p.json
    python -m benchmarks.profile --train-models vit_b_16,resnet50 --json OUT/t.json
    python -m benchmarks.profile --device cpu --size smoke --train-models gpt2_small  # a check

Training steps (`--train-models`, benchmarks/training.py's step: forward under bf16
autocast, backward) are profiled per column like a model, with the gradients kept.

Per column: the host's wall ms per synchronised call, do_bench's median, and torch.profiler's
CUDA kernels per call (count, summed kernel time, the top kernels by time). Wall well above
the kernel time means the host's launches bound the call, not the GPU; the top kernels say
which of them differ between the columns (an ATen kernel where the other compiles one, an
fp32 matmul where the other stays in bf16). A measurement to read before changing things.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch

from benchmarks import cases as case_table
from benchmarks import models as model_table
from benchmarks import training as train_table
from benchmarks.measure import columns
from benchmarks.timing import median_ms


def _wall_ms(fn: Callable[[], Any], calls: int = 20) -> float:
    best = float("inf")
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls * 1e3)
    return best


def _profiled(fn: Callable[[], Any], calls: int, activity: Any) -> Any:
    """torch.profiler over `calls` synchronised calls of fn (after one unprofiled call)."""
    from torch.profiler import profile

    fn()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[activity]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
    return prof


def kernels(fn: Callable[[], Any], calls: int = 5, top: int = 15) -> dict[str, Any]:
    """CUDA kernels per call: count, summed us, and the top kernels by time."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity

    prof = _profiled(fn, calls, ProfilerActivity.CUDA)
    per: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type != DeviceType.CUDA or e.name.startswith(("Memcpy", "Memset")):
            continue
        per[e.name][0] += 1
        per[e.name][1] += e.device_time_total if hasattr(e, "device_time_total") \
            else e.cuda_time_total
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    return {"count": round(sum(n for n, _ in per.values()) / calls),
            "kernel_us": round(sum(t for _, t in per.values()) / calls, 1),
            "top": [{"name": name[:110], "per_call": round(n / calls, 2),
                     "us": round(t / calls, 1)} for name, (n, t) in rows[:top]]}


def host_ops(fn: Callable[[], Any], calls: int = 5, top: int = 20) -> dict[str, Any]:
    """The host's side of a call: torch.profiler's CPU ops per call by self time (ATen
    ops, cuDNN calls, Triton launches as `kernelscope`/`triton` records), for a call whose
    wall time is well above its kernel time."""
    from torch.profiler import ProfilerActivity

    prof = _profiled(fn, calls, ProfilerActivity.CPU)
    rows = sorted(prof.key_averages(), key=lambda a: -a.self_cpu_time_total)
    return {"host_us": round(sum(a.self_cpu_time_total for a in rows) / calls, 1),
            "host_top": [{"name": a.key[:110], "per_call": round(a.count / calls, 2),
                          "self_us": round(a.self_cpu_time_total / calls, 1)}
                         for a in rows[:top]]}


def python_host(fn: Callable[[], Any], calls: int = 10, top: int = 25) -> dict[str, Any]:
    """The host's Python per call under cProfile (after one unprofiled call): functions by
    own time, with their calls per step. cProfile slows every Python call alike, so read
    it for where the host's time goes (the wrapper, launches, AOTAutograd's runtime), not
    for absolute microseconds."""
    import cProfile
    import pstats
    from pathlib import Path

    fn()
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: -kv[1][2])
    return {"python_us": round(sum(v[2] for v in stats.values()) / calls * 1e6, 1),
            "python_top": [{"name": f"{Path(f).name}:{line}({name})"[:110],
                            "per_call": round(v[1] / calls, 2),
                            "own_us": round(v[2] / calls * 1e6, 1),
                            "cum_us": round(v[3] / calls * 1e6, 1)}
                           for (f, line, name), v in rows[:top]]}


def profile_one(fn: Any, inputs: tuple[Any, ...], settings: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, kw in [("eager", None), *columns(settings)]:
        cell: dict[str, Any] = {}
        try:
            torch._dynamo.reset()
            f = fn if kw is None else torch.compile(fn, **kw)
            with torch.no_grad():
                for _ in range(3):
                    f(*inputs)
                call = (lambda f=f: f(*inputs))
                cell["wall_ms"] = round(_wall_ms(call), 3)
                cell["ms"] = round(median_ms(call, "cuda"), 3)
                cell.update(kernels(call))
        except Exception as e:  # noqa: BLE001 - a failing column is a cell
            cell["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        out[label] = cell
        print(json.dumps({label: {k: v for k, v in cell.items() if k != "top"}}), flush=True)
    return out


def _cell(call: Callable[[], Any], device: str, top: int = 15, host: bool = False
          ) -> dict[str, Any]:
    """Wall and do_bench ms of a warm call; on a GPU its kernels too."""
    cell: dict[str, Any] = {}
    for _ in range(3):
        call()
    if device.startswith("cuda"):
        cell["wall_ms"] = round(_wall_ms(call), 3)
    cell["ms"] = round(median_ms(call, device), 3)
    if device.startswith("cuda"):
        cell.update(kernels(call, top=top))
        if host:
            cell.update(host_ops(call))
            cell.update(python_host(call))
    return cell


def profile_train(entry: train_table.TrainModel, settings: dict[str, Any]) -> dict[str, Any]:
    """One training step per column: eager, then each compiled column on a fresh copy."""
    import copy

    device, smoke = settings["device"], settings["size"] == "smoke"
    base, batch, loss_fn = entry.make(device, smoke)
    out: dict[str, Any] = {}
    for label, kw in [("eager", None), *columns(settings)]:
        try:
            torch._dynamo.reset()
            model = base if kw is None else copy.deepcopy(base)
            params = list(model.parameters())
            run = model if kw is None else torch.compile(model, **kw)
            out[label] = _cell(train_table.step_fn(run, batch, loss_fn, device, params),
                               device, settings.get("top", 15), settings.get("host", False))
        except Exception as e:  # noqa: BLE001 - a failing column is a cell
            out[label] = {"error": f"{type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''}"}
        print(json.dumps({label: {k: v for k, v in out[label].items()
                                  if k not in ("top", "host_top", "python_top")}}),
              flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="")
    ap.add_argument("--cases", default="")
    ap.add_argument("--train-models", default="")
    ap.add_argument("--device", default="cuda", help="cpu: training steps only, no kernels")
    ap.add_argument("--size", choices=["gpu", "smoke"], default="gpu")
    ap.add_argument("--json", default="profile.json")
    ap.add_argument("--no-inductor", dest="inductor", action="store_false")
    ap.add_argument("--top", type=int, default=15, help="kernels listed per column")
    ap.add_argument("--host", action="store_true",
                    help="training steps: also the host's CPU ops per call by self time, "
                    "and its Python functions by own time (cProfile)")
    ap.add_argument("--ks-options", default="{}", help="Kernelscope compile options (JSON)")
    ap.add_argument("--ks-options-b", default="",
                    help="a second Kernelscope column (kernelscope_b) with these options")
    args = ap.parse_args(argv)
    settings = {"device": args.device, "size": args.size, "inductor": args.inductor,
                "top": args.top, "host": args.host, "ks_options": json.loads(args.ks_options),
                "ks_options_b": json.loads(args.ks_options_b) if args.ks_options_b else None}
    gpu = torch.cuda.get_device_name() if args.device.startswith("cuda") else "none"
    result: dict[str, Any] = {"gpu": gpu, "torch": torch.__version__, "items": {}}
    todo: list[tuple[str, Callable[[], tuple[Any, tuple[Any, ...]]]]] = []

    def model_maker(m: model_table.Model) -> Callable[[], tuple[Any, tuple[Any, ...]]]:
        def make() -> tuple[Any, tuple[Any, ...]]:
            module, x = m.make("cuda")
            return module, (x,)
        return make

    if args.models:
        todo += [(m.name, model_maker(m))
                 for m in model_table.by_name([n for n in args.models.split(",") if n])]
    if args.cases:
        todo += [(c.name, functools.partial(c.make, "cuda", "gpu"))
                 for c in case_table.by_name([n for n in args.cases.split(",") if n])]
    for entry in train_table.by_name([n for n in args.train_models.split(",") if n]) \
            if args.train_models else []:
        torch.manual_seed(0)
        print(f"== train:{entry.name}", flush=True)
        result["items"][f"train:{entry.name}"] = profile_train(entry, settings)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    for name, make in todo:
        torch.manual_seed(0)
        print(f"== {name}", flush=True)
        fn, inputs = make()
        result["items"][name] = profile_one(fn, inputs, settings)
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        del fn, inputs
        torch.cuda.empty_cache()
    for name, cols in result["items"].items():
        for label, cell in cols.items():
            print(f"== {name}/{label}: wall {cell.get('wall_ms')} ms, do_bench {cell.get('ms')} "
                  f"ms, {cell.get('count')} kernels, {cell.get('kernel_us')} us in kernels "
                  f"{cell.get('error', '')}")
            for k in cell.get("top", []):
                print(f"   {k['us']:9.1f} us  x{k['per_call']:<5} {k['name']}")
            if "host_us" in cell:
                print(f"   host: {cell['host_us']} us of CPU ops' self time per call")
            for k in cell.get("host_top", []):
                print(f"   {k['self_us']:9.1f} us  x{k['per_call']:<5} {k['name']}")
            if "python_us" in cell:
                print(f"   python (cProfile): {cell['python_us']} us own time per call")
            for k in cell.get("python_top", []):
                print(f"   {k['own_us']:9.1f} us own {k['cum_us']:9.1f} cum  "
                      f"x{k['per_call']:<6} {k['name']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
