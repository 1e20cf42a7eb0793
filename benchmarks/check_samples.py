"""Every sample through the whole pipeline on a GPU (Triton backend), in parallel.

    PYTHONPATH=. python benchmarks/check_samples.py [--jobs 8] [--out DIR] [--inductor]

Prints one row per sample (run ok against eager, kernels, eager and Kernelscope ms at the
samples' own small sizes) and writes every event stream to DIR/samples.ndjson.
Numbers only; the exit status says whether every sample matched eager.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelscope.compiler.events import types as ev
from kernelscope.compiler.events.read import EventError, latest, parse_events

ROOT = Path(__file__).resolve().parent.parent


def run_one(path: Path, device: str, inductor: bool) -> tuple[str, list[dict[str, Any]], str]:
    cmd = [sys.executable, "-m", "kernelscope.compiler", "compile", str(path), "--device", device,
           "--json"] + (["--inductor"] if inductor else [])
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    tail = "" if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr[-500:]}"
    return path.stem, events, tail


def summarize(name: str, events: list[dict[str, Any]], tail: str) -> dict[str, Any]:
    """One row of the table, from the sample's events read through their dataclasses."""
    row: dict[str, Any] = {"sample": name, "ok": False, "kernels": 0, "extern": 0}
    try:
        typed = parse_events(events)
    except EventError as e:
        return {**row, "eager_ms": None, "kernelscope_ms": None, "inductor_ms": None,
                "error": f"unreadable events: {e}"[:300]}
    run, sched = latest(typed, ev.Run), latest(typed, ev.Scheduling)
    row["ok"] = run is not None and run.ok
    kinds = [k.kind for g in (sched.graphs if sched else []) for k in g.kernels]
    row["kernels"] = sum(1 for kind in kinds if kind != "extern")
    row["extern"] = sum(1 for kind in kinds if kind == "extern")
    prof = latest(typed, ev.Profile)
    row["eager_ms"] = prof.eager_ms if prof else None
    row["kernelscope_ms"] = prof.kernelscope_ms if prof else None
    row["inductor_ms"] = prof.inductor_ms if prof else None
    err = latest(typed, ev.Error)
    if err is not None:
        row["error"] = f"{err.stage}: {err.message[:200]}"
    elif tail:
        row["error"] = tail
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=8)
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", default=None)
    p.add_argument("--inductor", action="store_true")
    args = p.parse_args()
    samples = sorted((ROOT / "samples").glob("*.py"))
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda s: run_one(s, args.device, args.inductor), samples))
    rows = [summarize(*r) for r in results]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "samples.ndjson", "w") as f:
            for name, events, _ in results:
                for e in events:
                    f.write(json.dumps({"sample": name, **e}) + "\n")
        (out / "samples-summary.json").write_text(json.dumps(rows, indent=1))
    print("| sample | matches eager | kernels (+extern) | eager ms | kernelscope ms | "
          "inductor ms | error |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['sample']} | {'yes' if r['ok'] else 'NO'} | {r['kernels']} (+{r['extern']})"
              f" | {r['eager_ms']} | {r['kernelscope_ms']} | {r['inductor_ms']} | "
              f"{r.get('error', '')} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
