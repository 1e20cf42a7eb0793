"""Where one explorer job's time goes, part by part, in a warm worker's process.

    PYTHONPATH=$PWD python scripts/job_parts.py [--sample samples/transformer_block.py]
                                                [--device cuda] [--backend triton]
                                                [--runs 2] [--cprofile DIR]

Warms up as a server's warm worker does (server/jobs/warm.py: the built-in snippet on the
CPU and, where there is one, the GPU), then runs the explorer's pipeline on the sample in
this process `--runs` times (Dynamo reset before each; the first run builds every kernel,
later ones find this process's caches warm). It prints, per run, when each event arrived
and when our own result was complete (the `profile` event: what the server's `done`
waits for), then the time of the parts the compile and profile stages are made of:
the compile pool (`prebuild`: kernel builds, on a GPU their loads and launchers), the first
launch (`warmup`), the kernels' reports, the whole-call timings (`bench_samples`), the rows
and the peak memory. `--cprofile DIR` also writes each run's cProfile (the main thread).

The server adds to this what a job costs outside the compiler (the sandbox, the stream):
scripts/latency.py measures the whole click-to-result time. This is a benchmark, not a
test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PARTS = (("compiler.compile_fx", "_prebuild"), ("compiler.runtime.loader", "warmup"),
         ("compiler.runtime.loader", "_reports"), ("compiler.profiling", "bench_samples"),
         ("compiler.profiling", "_ours_rows"), ("compiler.profiling", "_eager_rows"),
         ("compiler.runtime.torch_profile", "peak_bytes"))


def timed_parts(taken: list[tuple[str, float]]) -> None:
    """Wrap each part in PARTS with a timer that appends (name, ms) to `taken`."""
    import importlib

    for module_name, name in PARTS:
        module = importlib.import_module(f"kernelscope.{module_name}")
        fn = getattr(module, name)

        def wrapper(*a: Any, _fn: Any = fn, _name: str = name, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                taken.append((_name, round((time.perf_counter() - start) * 1000, 1)))

        setattr(module, name, functools.wraps(fn)(wrapper))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", default=str(REPO / "samples" / "transformer_block.py"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--backend", default="auto")
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--cprofile", default=None, metavar="DIR")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    start = time.perf_counter()
    from server.jobs.warm import settle_heap, warm_up

    warm_up()
    settle_heap()
    print(f"warm-up {time.perf_counter() - start:.2f} s", flush=True)
    import torch

    from kernelscope.compiler.options import CompileOptions
    from kernelscope.compiler.pipeline import run_pipeline

    taken: list[tuple[str, float]] = []
    timed_parts(taken)
    code = Path(args.sample).read_text(encoding="utf-8")
    for run in range(1, args.runs + 1):
        torch._dynamo.reset()
        taken.clear()
        prof = cProfile.Profile() if args.cprofile else None
        arrived: list[tuple[float, str]] = []
        t0 = time.perf_counter()
        if prof is not None:
            prof.enable()
        options = CompileOptions(device=args.device, backend=args.backend)
        for event in run_pipeline(code, options, args.sample):
            if event.stage != "progress":
                arrived.append((round(time.perf_counter() - t0, 3), event.stage))
        if prof is not None:
            prof.disable()
            prof.dump_stats(str(Path(args.cprofile) / f"job_parts_{run}.prof"))
        own = next((t for t, stage in arrived if stage == "profile"), None)
        print(f"run {run}: own result at {own} s; all events {arrived[-1][0]} s", flush=True)
        print("  events (s): " + ", ".join(f"{stage} {t}" for t, stage in arrived))
        print("  parts (ms): " + ", ".join(f"{name} {ms}" for name, ms in taken), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
