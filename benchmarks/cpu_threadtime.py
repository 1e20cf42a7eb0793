"""The CPU suite on one thread, timed in thread CPU time: numbers a shared machine can give.

    python -m benchmarks.cpu_threadtime                    # the CPU suite, 9 rounds
    python -m benchmarks.cpu_threadtime --cases softmax,bias_relu --rounds 15

On a loaded 2-core host a two-thread OpenMP region waits for whichever thread the kernel
scheduled out, so wall-clock medians (the runner's `--device cpu` columns) measure the
load. Here everything runs on the calling thread (`torch.set_num_threads(1)`: eager's
ATen, Inductor's C++ and ours share that one OpenMP runtime), and each timing is
`time.thread_time()`, which does not count the time the thread was not running. Eager,
Inductor and Kernelscope are timed in turns, in one process, `--rounds` times; the table
gives the min and median ms per call, and Kernelscope's median over the others'. What it
cannot remove: other processes' use of the shared caches and memory bandwidth.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks import cases as case_table
from benchmarks.measure import compare, kernelscope


def _per_call_ms(fn: Callable[..., Any], args: tuple[Any, ...], calls: int) -> float:
    fn(*args)
    t0 = time.thread_time()
    for _ in range(calls):
        fn(*args)
    return (time.thread_time() - t0) / calls * 1000


def run(names: list[str], rounds: int, inductor: bool) -> list[str]:
    rows = ["| case | eager ms min/median | Inductor ms | Kernelscope ms | KS / eager | "
            "KS / Inductor | check |", "|---|---|---|---|---|---|---|"]
    ratios = []
    for name in names:
        case = case_table.by_name([name])[0]
        torch.manual_seed(0)
        fn, inputs = case.make("cpu", "cpu")
        ref = fn(*inputs)
        cols: dict[str, Callable[..., Any]] = {"eager": fn}
        if inductor:
            torch._dynamo.reset()
            cols["inductor"] = torch.compile(fn, backend="inductor")
            cols["inductor"](*inputs)
        torch._dynamo.reset()
        cols["ks"] = torch.compile(fn, backend=kernelscope())
        check = compare(cols["ks"](*inputs), ref, case.tol)
        calls = max(1, int(30 / max(_per_call_ms(fn, inputs, 1), 0.01)))  # ~30 ms a turn
        times: dict[str, list[float]] = {k: [] for k in cols}
        for _ in range(rounds):
            for k, c in cols.items():
                times[k].append(_per_call_ms(c, inputs, calls))
        med = {k: statistics.median(v) for k, v in times.items()}
        cell = {k: f"{min(v):.3f} / {med[k]:.3f}" for k, v in times.items()}
        vs_ind = med["ks"] / med["inductor"] if inductor else None
        if vs_ind:
            ratios.append(vs_ind)
        verdict = "ok" if check["ok"] else "MISMATCH"
        rows.append(f"| {name} | {cell['eager']} | {cell.get('inductor', '—')} | {cell['ks']} | "
                    f"{med['ks'] / med['eager']:.2f} | {f'{vs_ind:.2f}' if vs_ind else '—'} | "
                    f"{verdict} (rel err {check.get('rel_err', 0):.1e}) |")
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        rows.append(f"\nGeometric mean KS / Inductor over {len(ratios)} cases: {geo:.2f}")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default=",".join(case_table.CPU_SUITE))
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--no-inductor", dest="inductor", action="store_false")
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"1 thread, thread CPU time, {args.rounds} rounds; torch {torch.__version__}; "
          f"load average {os.getloadavg()[0]:.1f}")
    print("\n".join(run([n for n in args.cases.split(",") if n], args.rounds, args.inductor)))


if __name__ == "__main__":
    main()
