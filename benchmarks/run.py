"""Benchmark runner: Kernelscope against eager and Inductor, side by side, in one run.

    python -m benchmarks                          # GPU: the 16-case suite, six models, overheads,
                                                  # five training steps
    python -m benchmarks --only train             # GPU: the training section alone
    python -m benchmarks --device cpu --size smoke --only train --out -   # CI: tiny models
    python -m benchmarks --device cpu             # the CPU-sized suite against Inductor's C++
    python -m benchmarks --device cpu --size smoke --cases gelu_tanh,softmax --out -  # CI
    python -m benchmarks --only suite --cases softmax,cross_entropy --json OUT/bench.json
    python -m benchmarks --device cpu --only stages --out -   # compile stages per sample
    python -m benchmarks --only infer --infer-models zoo --jobs 6   # GPU: bf16 inference

Every item (a suite case, a model, an overhead probe) runs in its own process with a
time limit, so a crash, a faulting kernel or a hang costs one row. `--jobs N` runs N items
at once: they compile in parallel, but each takes one run-wide lock for its timings, so
no two items time at the same time and nothing compiles while one times (launch-bound
models time the host too). Raw results go to --json after every item (a run cut short
keeps what it measured); the Markdown section is printed and appended to --out.
Timings never fail the run; it exits 1 when Kernelscope errored or mismatched somewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch

from benchmarks import cases as case_table
from benchmarks import inference as infer_table
from benchmarks import models as model_table
from benchmarks import training as train_table
from benchmarks.measure import LOCK_ENV, measure
from benchmarks.report import is_ok, section
from benchmarks.stages import sample_names
from benchmarks.timing import ROUNDS

ROOT = Path(__file__).resolve().parent.parent

RESULT_TAG = "KSBENCH-RESULT "
OVERHEADS = ["call_us", "graphs_chain10", "graphs_gpt2_block"]


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {"device": args.device, "size": args.size, "warmup": args.warmup, "rep": args.rep,
            "inductor": args.inductor, "max_autotune": args.max_autotune,
            "reduce_overhead": args.reduce_overhead, "rounds": args.rounds,
            "ks_options": json.loads(args.ks_options),
            "ks_options_b": json.loads(args.ks_options_b) if args.ks_options_b else None}


def items(args: argparse.Namespace) -> list[str]:
    only = set(args.only.split(",")) if args.only else {"suite", "models", "overhead", "train"}
    cuda = args.device.startswith("cuda")
    wanted = [n for n in args.cases.split(",") if n]
    out: list[str] = []
    if "suite" in only:
        default = [c.name for c in case_table.CASES] if cuda or args.size == "gpu" \
            else case_table.CPU_SUITE
        names = [c.name for c in case_table.by_name(wanted)] if wanted else default
        out += [f"case:{n}" for n in names]
    if "models" in only and (cuda or "models" in (args.only or "")):
        wanted_models = [n for n in args.models.split(",") if n]
        out += [f"model:{m.name}" for m in model_table.by_name(wanted_models)]
    if "train" in only and (cuda or "train" in (args.only or "")):
        wanted_train = [n for n in args.train_models.split(",") if n]
        out += [f"train:{m.name}" for m in train_table.by_name(wanted_train)]
    if "overhead" in only:
        out += [f"overhead:{n}" for n in OVERHEADS]
    if "infer" in only:  # not in the default run: the zoo and timm in bf16 inference
        wanted_infer = [n for n in args.infer_models.split(",") if n]
        out += [f"infer:{m.name}" for m in infer_table.by_name(wanted_infer)]
    if "stages" in only:  # not in the default run: one process per sample
        out += [f"stages:{n}" for n in sample_names()]
    # Longest first, so that with --jobs N the models' compiles overlap the rest.
    return sorted(out, key=lambda i: 0 if i.startswith(("model:", "train:", "infer:timm"))
                  else 1)


def _child_env(lock: str, scratch: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env[LOCK_ENV] = lock
    # Cold compiles: every cache starts empty, per item.
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton")
    env["KERNELSCOPE_CACHE"] = os.path.join(scratch, "kernelscope")
    return env


def run_isolated(item: str, args: argparse.Namespace, lock: str, limit: float | None = None
                 ) -> dict[str, Any]:
    """One item in its own process, killed after `limit` s (default: --item-timeout)."""
    name = item.split(":", 1)[1]
    limit = args.item_timeout if limit is None else limit
    with tempfile.TemporaryDirectory(prefix="ksbench-") as scratch:
        cmd = [sys.executable, "-m", "benchmarks.run", "--child", item,
               "--settings", json.dumps(_settings(args))]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=_child_env(lock, scratch),
                                  stdout=subprocess.PIPE, text=True,
                                  timeout=limit, check=False)
        except subprocess.TimeoutExpired:
            return {"item": item, "case": name, "failed": f"timed out after {limit:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG):])
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    return {"item": item, "case": name, "failed": f"crashed ({how}), see stderr"}


def _run(cmd: list[str]) -> str | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str) -> dict[str, Any]:
    env: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                           "device": device, "cuda": torch.version.cuda,
                           "threads": torch.get_num_threads()}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device.startswith("cuda") and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        smi = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        env["driver"] = smi.splitlines()[0] if smi else None
    else:
        env["gpu"] = None
        env["cpu"] = platform.processor() or platform.machine()
    env["commit"] = (os.environ.get("KERNELSCOPE_COMMIT")
                     or _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
                     or "unknown")
    return env


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--size", choices=case_table.SIZES, default=None,
                   help="input sizes (default: gpu on cuda, cpu on the CPU)")
    p.add_argument("--only", default="",
                   help="comma-separated: suite, models, train, overhead, stages, infer")
    p.add_argument("--cases", default="", help="suite cases (default: the device's suite)")
    p.add_argument("--models", default="", help="models (default: all six)")
    p.add_argument("--train-models", default="", help="training steps (default: all five)")
    p.add_argument("--infer-models", default="",
                   help="bf16 inference (--only infer): zoo and timm models, or the words "
                        "zoo / zoo1 / zoo2 (its halves) / timm (default: all)")
    p.add_argument("--rounds", type=int, default=ROUNDS,
                   help="--only infer, train: interleaved timing rounds per column")
    p.add_argument("--out", default=str(ROOT / "docs" / "perf.md"),
                   help="Markdown file to append the dated section to; '-' for none")
    p.add_argument("--json", default=None, help="raw results, rewritten after every item")
    p.add_argument("--title", default="", help="a few words for the section's heading")
    p.add_argument("--no-inductor", dest="inductor", action="store_false")
    p.add_argument("--max-autotune", action="store_true",
                   help="also Inductor with mode='max-autotune-no-cudagraphs'")
    p.add_argument("--reduce-overhead", action="store_true",
                   help="also Inductor's mode='reduce-overhead' and Kernelscope with "
                        "cuda_graphs (CUDA graphs against CUDA graphs)")
    p.add_argument("--ks-options", default="{}",
                   help='Kernelscope compile options as JSON, e.g. \'{"conv_layout": '
                        '"contiguous"}\' (an A/B against the defaults)')
    p.add_argument("--ks-options-b", default="",
                   help="a second Kernelscope column (kernelscope_b) with these options, "
                        "e.g. '{\"realize\": \"shared\"}': an A/B in one process")
    p.add_argument("--warmup", type=int, default=25, help="ms of warmup per timing")
    p.add_argument("--rep", type=int, default=100, help="ms of timed calls per timing")
    p.add_argument("--jobs", type=int, default=1, help="items compiling at once")
    p.add_argument("--item-timeout", type=int, default=300, help="seconds per item")
    p.add_argument("--budget-s", type=int, default=0,
                   help="seconds for the whole run: an item past it is killed, one not "
                        "started is not run (rows say so); 0: no limit")
    p.add_argument("--no-isolate", dest="isolate", action="store_false",
                   help="run every item in this process (faster, less robust)")
    p.add_argument("--render", default=None, metavar="JSON",
                   help="print the Markdown section of a --json file (a run cut short) and "
                        "exit")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--settings", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child:
        print(RESULT_TAG + json.dumps(measure(args.child, json.loads(args.settings))),
              flush=True)
        return 0
    if args.render:
        data = json.loads(Path(args.render).read_text())
        print(section(data["rows"], data["env"], data["peak_gbps"], data["settings"],
                      f"rendered from {args.render}", args.title))
        return 0
    cuda = args.device.startswith("cuda")
    args.size = args.size or ("gpu" if cuda else "cpu")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here; use --device cpu")
    todo = items(args)
    env = environment(args.device)
    peak = None
    if cuda:
        from benchmarks.bandwidth import copy_gbps

        peak = copy_gbps(args.device)
    rows: dict[str, dict[str, Any]] = {}
    done = threading.Lock()
    lock_file = tempfile.NamedTemporaryFile(prefix="ksbench-lock-", delete=False)
    lock_file.close()

    deadline = time.monotonic() + args.budget_s if args.budget_s else None

    def one(item: str) -> None:
        print(f"-- {item}", file=sys.stderr, flush=True)
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left < 10:
            row = {"item": item, "case": item.split(":", 1)[1],
                   "failed": f"not run: the run's --budget-s {args.budget_s} s was spent"}
        elif args.isolate:
            row = run_isolated(item, args, lock_file.name,
                               None if left is None else min(args.item_timeout, left))
        else:
            row = measure(item, _settings(args))
        with done:
            rows[item] = row
            print(f"-- {item}: {'ok' if is_ok(row) else 'PROBLEM'}", file=sys.stderr,
                  flush=True)
            if args.json:  # after every item, so a run cut short keeps what it measured
                ordered = [rows[i] for i in todo if i in rows]
                Path(args.json).write_text(json.dumps(
                    {"env": env, "peak_gbps": peak, "settings": _settings(args),
                     "rows": ordered}, indent=1))

    with ThreadPoolExecutor(max(1, args.jobs if args.isolate else 1)) as pool:
        list(pool.map(one, todo))
    os.unlink(lock_file.name)
    ordered = [rows[i] for i in todo]
    command = "python -m benchmarks " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = section(ordered, env, peak, _settings(args), command.strip(), args.title)
    print(text)
    if args.out != "-":
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(("\n" if out.exists() and out.stat().st_size else "") + text)
        print(f"appended to {out}", file=sys.stderr)
    bad = [r["case"] for r in ordered if not is_ok(r)]
    if bad:
        print(f"Kernelscope failed or mismatched on: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
