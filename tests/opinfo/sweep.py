"""The OpInfo sweep: run the differential harness over op_db in parallel shards.

    python tests/opinfo/sweep.py                          # full sweep, C++ + Triton interpreter
    python tests/opinfo/sweep.py --target cpp --dtypes f32 --ops add,sum
    python tests/opinfo/sweep.py --target cuda            # on a GPU host
    python tests/opinfo/sweep.py --report-only            # rewrite docs/coverage.md
    python tests/opinfo/sweep.py --mode grad --device cpu # the gradient sweep (f32)
    python tests/opinfo/sweep.py --mode grad --device cuda

Each target writes its per-case results to docs/coverage/<target>.jsonl and docs/coverage.md
is rebuilt from every such file present. A run with --ops merges by default: it replaces the
records of the ops and dtypes it ran and keeps every other record (--no-merge rewrites the
file); the target's .meta.json lists each run merged into the file. A shard is a subprocess
of its own: a case that crashes the process (the Triton interpreter reading out of bounds, a
segfault) is recorded as an error and the shard restarts after it. Each case has a time limit
(--timeout).

`--mode grad` is the gradient sweep (grad_harness.py): the ops with autograd support, their
samples with requires_grad=True, outputs and input gradients compared; its results go to
docs/coverage/grad-<target>.jsonl. `--device cpu|cuda` names the target by its device
(cpp or cuda).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OUT_DIR = REPO / "docs" / "coverage"
TARGETS = {  # name -> (device, compile options, extra environment)
    "cpp": ("cpu", {"backend": "cpp"}, {}),
    "triton-interpret": ("cpu", {"backend": "triton"}, {"TRITON_INTERPRET": "1"}),
    "cuda": ("cuda", {}, {}),
}
ALL_DTYPES = "f32,f16,bf16,f64,i32,i64,bool"
GRAD_DTYPES = "f32"
DEVICE_TARGETS = {"cpu": "cpp", "cuda": "cuda"}


def _ops(names: str | None, mode: str = "forward") -> list[Any]:
    from opinfo_harness import op_key
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if mode != "grad" or op.supports_autograd]
    if not names:
        return ops
    wanted = set(names.split(","))
    return [op for op in ops if op_key(op) in wanted or op.name in wanted]


def results_name(target: str, mode: str) -> str:
    """The results file's stem: the target, prefixed `grad-` for the gradient sweep."""
    return f"grad-{target}" if mode == "grad" else target


def worker(args: argparse.Namespace) -> int:
    """Run the cases of one shard, appending one JSON line per case (and a start marker)."""
    import torch
    from grad_harness import grad_samples, run_grad_case
    from opinfo_harness import DTYPES, CaseResult, op_key, run_case, samples

    device, options, _env = TARGETS[args.target]
    options = {**options, "cache_dir": args.cache_dir} if args.cache_dir else options
    path = Path(args.results)
    done: set[tuple[str, str, int]] = set()
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            done.add(tuple(rec["start"] if "start" in rec else
                           (rec["op"], rec["dtype"], rec["sample"])))  # type: ignore[arg-type]
    torch.set_num_threads(1)
    ops = _ops(args.ops, args.mode)
    grad = args.mode == "grad"
    sample_fn, case_fn = (grad_samples, run_grad_case) if grad else (samples, run_case)
    with path.open("a") as out:
        for i, op in enumerate(ops):
            if i % args.jobs != args.shard:
                continue
            supported = (op.supported_backward_dtypes(device) if grad
                         else op.supported_dtypes(device))
            if not any(d in supported for d in DTYPES.values()):
                out.write(json.dumps(unsweepable(op, device, supported)) + "\n")
                continue
            for dname in dtypes_to_run(args.dtypes.split(","), supported, DTYPES, grad):
                dtype = DTYPES[dname]
                for k, sample in enumerate(sample_fn(op, device, dtype, args.samples)):
                    key = (op_key(op), dname, k)
                    if key in done:
                        continue
                    out.write(json.dumps({"start": list(key)}) + "\n")
                    out.flush()
                    try:
                        res = case_fn(op, dname, k, sample, options, args.timeout)
                    except Exception as e:  # noqa: BLE001 - the harness itself must go on
                        res = CaseResult(*key, "error", f"harness: {type(e).__name__}: {e}")
                    out.write(json.dumps(res.to_json()) + "\n")
                    out.flush()
    return 0


SUBSTITUTES = ("i64", "bool", "f64", "i32", "f16", "bf16")
GRAD_SUBSTITUTES = ("f64", "f16", "bf16")


def dtypes_to_run(requested: list[str], supported: Any, dtypes: dict[str, Any],
                  grad: bool = False) -> list[str]:
    """The requested dtypes the op supports; for an op with none of them (integer-only ops
    in a float32 sweep), its first dtype among SUBSTITUTES (the floating ones for the
    gradient sweep), so every op gets a status."""
    run = [d for d in requested if dtypes[d] in supported]
    subs = GRAD_SUBSTITUTES if grad else SUBSTITUTES
    return run or [d for d in subs if dtypes[d] in supported][:1]


def unsweepable(op: Any, device: str, supported: Any) -> dict[str, Any]:
    """The record of an op none of whose dtypes the harness compares (complex or float8
    only, or nothing on this device): a skip, with what it does support."""
    from opinfo_harness import op_key

    names = sorted(str(d).removeprefix("torch.") for d in supported)
    what = f"only {', '.join(names)}" if names else "no dtype at all"
    return {"op": op_key(op), "dtype": "none", "sample": 0, "status": "skip",
            "reason": f"not swept: on {device} the op supports {what}", "seconds": 0.0}


def _shard_cmd(args: argparse.Namespace, shard: int, results: Path) -> list[str]:
    cmd = [sys.executable, str(HERE / "sweep.py"), "--worker", "--target", args.target,
           "--mode", args.mode,
           "--shard", str(shard), "--jobs", str(args.jobs), "--results", str(results),
           "--dtypes", args.dtypes, "--samples", str(args.samples),
           "--timeout", str(args.timeout)]
    if args.ops:
        cmd += ["--ops", args.ops]
    if args.cache_dir:
        cmd += ["--cache-dir", args.cache_dir]
    return cmd


def _crash_record(results: Path, rc: int) -> bool:
    """After a shard died: record its unfinished case as an error. False if none."""
    lines = results.read_text().splitlines() if results.exists() else []
    if not lines:
        return False
    last = json.loads(lines[-1])
    if "start" not in last:
        return False
    op, dtype, sample = last["start"]
    rec = {"op": op, "dtype": dtype, "sample": sample, "status": "error",
           "reason": f"crashed the process (exit {rc})", "seconds": 0.0}
    with results.open("a") as out:
        out.write(json.dumps(rec) + "\n")
    return True


def drive(args: argparse.Namespace) -> Path:
    """Run all shards of one target in parallel, restarting shards after crashes."""
    _device, _options, env_extra = TARGETS[args.target]
    tmp = Path(args.work_dir or (REPO / ".coverage-work")) / results_name(args.target,
                                                                          args.mode)
    tmp.mkdir(parents=True, exist_ok=True)
    if not args.resume:
        for f in tmp.glob("shard*.jsonl"):
            f.unlink()
    env = {**os.environ, **env_extra, "PYTHONPATH": os.pathsep.join(
        [str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])}
    shards = {k: tmp / f"shard{k}.jsonl" for k in range(args.jobs)}
    procs = {k: subprocess.Popen(_shard_cmd(args, k, p), env=env) for k, p in shards.items()}
    start = time.time()
    while procs:
        time.sleep(1)
        for k, proc in list(procs.items()):
            rc = proc.poll()
            if rc is None:
                continue
            del procs[k]
            if rc != 0 and _crash_record(shards[k], rc):
                procs[k] = subprocess.Popen(_shard_cmd(args, k, shards[k]), env=env)
    cases = []
    for p in shards.values():
        for line in p.read_text().splitlines() if p.exists() else []:
            rec = json.loads(line)
            if "start" not in rec:
                cases.append(rec)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    out = (Path(args.output) if args.output
           else OUT_DIR / f"{results_name(args.target, args.mode)}.jsonl")
    meta_path = out.with_suffix(".meta.json")
    run = _versions(args, time.time() - start, len(cases))
    merge = args.merge if args.merge is not None else bool(args.ops)
    if merge and out.exists():
        from opinfo_harness import op_key

        ran = {op_key(op) for op in _ops(args.ops, args.mode)}
        old = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
        cases = merge_cases(old, cases, ran, set(args.dtypes.split(",")))
        old_meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        meta = merge_meta(old_meta, run, len({c["op"] for c in cases}),
                          len({op_key(op) for op in _ops(None, args.mode)}))
    else:
        meta = {**run, "runs": [run]}
    out.write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in
                           sorted(cases, key=lambda c: (c["op"], c["dtype"], c["sample"]))))
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    print(f"sweep {args.target}: {run['cases']} cases in {run['seconds']:.0f}s -> {out}"
          + (f" (merged: {len(cases)} cases in all)" if merge else ""))
    return out


def merge_cases(old: list[dict[str, Any]], new: list[dict[str, Any]], ops: set[str],
                dtypes: set[str]) -> list[dict[str, Any]]:
    """The old records, less those of the (op, dtype) pairs a run covered (the dtypes asked
    for, any it substituted, and the `none` record of an unsweepable op), plus the new."""
    ran = {(c["op"], c["dtype"]) for c in new}
    kept = [c for c in old if not (c["op"] in ops and (
        c["dtype"] in {*dtypes, "none"} or (c["op"], c["dtype"]) in ran))]
    return kept + new


def merge_meta(old: dict[str, Any], run: dict[str, Any], ops_in_file: int,
               ops_in_db: int) -> dict[str, Any]:
    """The latest run's versions on top, every run merged into the file under `runs`."""
    runs = old.get("runs") or ([{k: v for k, v in old.items() if k != "runs"}] if old else [])
    ops = f"{ops_in_file} of {ops_in_db} ({len(runs) + 1} runs merged)"
    full = re.sub(r" --ops \S+", "", run["command"])  # what reruns every op at once
    every = [*runs, run]
    # The file holds what every run swept: their dtypes, and their sample counts.
    dtypes = {d for r in every for d in str(r.get("dtypes", "")).split(",") if d}
    counts = sorted({int(r["samples"]) for r in every if "samples" in r})
    samples: Any = run.get("samples") if len(counts) < 2 else f"{counts[0]}-{counts[-1]}"
    return {**run, "ops": ops, "command": full, "runs": every, "samples": samples,
            "dtypes": ",".join(d for d in ALL_DTYPES.split(",") if d in dtypes)}


def _versions(args: argparse.Namespace, seconds: float, cases: int) -> dict[str, Any]:
    import torch

    try:
        import triton

        tv = triton.__version__
    except ImportError:
        tv = "missing"
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    return {"target": args.target, "mode": args.mode,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "torch": torch.__version__, "triton": tv, "gpu": gpu, "dtypes": args.dtypes,
            "samples": args.samples, "ops": args.ops or "all", "seconds": round(seconds, 1),
            "cases": cases,
            "command": " ".join(["python", "tests/opinfo/sweep.py"]
                                + (["--mode", "grad"] if args.mode == "grad" else [])
                                + ["--target", args.target, "--dtypes", args.dtypes,
                                   "--samples", str(args.samples)]
                                + (["--ops", args.ops] if args.ops else []))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", action="append", choices=sorted(TARGETS))
    ap.add_argument("--device", choices=sorted(DEVICE_TARGETS),
                    help="the target of a device: cpu is cpp, cuda is cuda")
    ap.add_argument("--mode", choices=["forward", "grad"], default="forward",
                    help="forward: outputs only; grad: outputs and input gradients")
    ap.add_argument("--dtypes", default=None,
                    help=f"default {ALL_DTYPES} (forward), {GRAD_DTYPES} (grad)")
    ap.add_argument("--samples", type=int, default=2, help="samples per op and dtype")
    ap.add_argument("--ops", default=None, help="comma-separated OpInfo names (default all)")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--output", default=None, help="results file (one target only)")
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--cache-dir", default=None)
    ap.add_argument("--resume", action="store_true", help="keep finished cases of a shard")
    ap.add_argument("--merge", action=argparse.BooleanOptionalAction, default=None,
                    help="replace only the swept ops' records in the results file and keep "
                         "the others (default: on with --ops, off without)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--no-report", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--results", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.dtypes is None:
        args.dtypes = GRAD_DTYPES if args.mode == "grad" else ALL_DTYPES
    if args.device:
        args.target = [*(args.target or []), DEVICE_TARGETS[args.device]]
    if args.worker:
        args.target = args.target[0]
        return worker(args)
    if not args.report_only:
        for target in args.target or ["cpp", "triton-interpret"]:
            sub = argparse.Namespace(**{**vars(args), "target": target})
            drive(sub)
    if not args.no_report:
        from coverage_report import write_report

        print(f"wrote {write_report(OUT_DIR, REPO / 'docs' / 'coverage.md')}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
