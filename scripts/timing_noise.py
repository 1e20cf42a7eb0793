"""How much a profile's figure swings while other jobs run: the gelu sample's spread.

    PYTHONPATH=$PWD python scripts/timing_noise.py [--runs 5] [--jobs 2]
                                                   [--sample samples/gelu_tanh.py]
                                                   [--background samples/transformer_block.py]
                                                   [--options JSON] [--no-lock]

Starts `--jobs` background jobs, each compiling `--background` again and again through the
compiler CLI (capture, C++ builds, run, profile: what a server's other workers do), then
compiles `--sample` `--runs` times, one after another, and prints each run's figures from
its `profile` event: ours and eager as median, p10, p90, p90/p10, repeats, and the
conditions (threads, pinned CPUs, load, timing slot). Every process shares one timing
lock file (KERNELSCOPE_TIMING_LOCK), as the server's workers do, unless `--no-lock`.
The summary gives the widest p90/p10 of any run and the spread of the medians across runs
(max/min). docs/profile.md records what it printed.

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _compile(sample: str, options: str | None, env: dict[str, str],
             timeout_s: float = 300) -> dict[str, Any] | None:
    argv = [sys.executable, "-m", "kernelscope.compiler", "compile", sample, "--json"]
    if options:
        argv += ["--options", options]
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=timeout_s, check=False)
    for line in out.stdout.splitlines():
        event = json.loads(line)
        if event.get("stage") == "profile":
            data: dict[str, Any] = event["data"]
            return data
    print(out.stderr[-2000:], file=sys.stderr)
    return None


def _background(n: int, sample: str, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    loop = (f"while true; do {sys.executable} -m kernelscope.compiler compile {sample} "
            "--json > /dev/null 2>&1; done")
    return [subprocess.Popen(["bash", "-c", loop], cwd=REPO, env=env,
                             start_new_session=True) for _ in range(n)]


def _ratio(t: dict[str, Any] | None) -> float | None:
    if not t or not t.get("p10"):
        return None
    return float(t["p90"]) / float(t["p10"])


def _row(i: int, p: dict[str, Any]) -> str:
    def fig(t: dict[str, Any] | None) -> str:
        if not t:
            return "-"
        return (f"{t['ms']:.4f} ms [{t['p10']:.4f}, {t['p90']:.4f}] "
                f"x{_ratio(t) or 0:.3f} n={t['repeats']}{' NOISY' if t['noisy'] else ''}")
    c = p.get("conditions") or {}
    return (f"run {i}: ours {fig(p.get('kernelscope_time'))} | eager {fig(p.get('eager_time'))}"
            f" | threads {c.get('threads')} cpus {c.get('cpus')} load {c.get('load_before')}"
            f" slot: {c.get('slot')}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", default="samples/gelu_tanh.py")
    ap.add_argument("--background", default="samples/transformer_block.py")
    ap.add_argument("--options", default=None, help="compile options as JSON")
    ap.add_argument("--no-lock", action="store_true")
    args = ap.parse_args()
    lock = Path(tempfile.mkdtemp(prefix="ks-timing-")) / "timing.lock"
    lock.touch()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if not args.no_lock:
        env["KERNELSCOPE_TIMING_LOCK"] = str(lock)
    background = _background(args.jobs, args.background, env)
    try:
        time.sleep(5)  # the background jobs under way
        results = []
        for i in range(args.runs):
            p = _compile(args.sample, args.options, env)
            if p is None or not p.get("measured"):
                print(f"run {i}: not measured: {p and p.get('reason')}")
                continue
            results.append(p)
            print(_row(i, p), flush=True)
    finally:
        for proc in background:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
    for side in ("kernelscope_time", "eager_time"):
        figs = [p[side] for p in results if p.get(side)]
        if not figs:
            continue
        widest = max(_ratio(t) or 0 for t in figs)
        lo, hi = min(t["ms"] for t in figs), max(t["ms"] for t in figs)
        print(f"{side}: widest p90/p10 {widest:.3f}; medians across {len(figs)} runs "
              f"{lo:.4f}..{hi:.4f} ms (max/min {hi / lo:.3f})")


if __name__ == "__main__":
    main()
