"""Benchmark runner: Kernelscope against eager and Inductor on the samples at GPU sizes.

For each case (benchmarks/cases.py): check Kernelscope's output against eager, time eager,
`torch.compile(fn, backend=<kernelscope>)` and `torch.compile(fn)` (Inductor), count the
kernels each launches, and print a Markdown table that is also appended, with the date,
GPU and versions, to docs/perf.md (or --out). Numbers only: a slow case never fails.
Each case runs in its own process, so a crash or a faulting kernel loses one row.

    PYTHONPATH=. python benchmarks/run.py [--cases add_relu,softmax] [--device cuda]
                                          [--out docs/perf.md] [--small] [--no-inductor]

--small runs the samples' own (small) example inputs: a quick check on a CPU.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python benchmarks/run.py` without PYTHONPATH=.
    sys.path.insert(0, str(ROOT))

import torch

from benchmarks import cases as case_table
from benchmarks.snippet import load_snippet, sample_paths
from benchmarks.timing import count_kernels, median_ms

RESULT_TAG = "KSBENCH-RESULT "
SMALL_SKIP = {"graph_break"}  # its print() would run inside every timed call


# ---- one case, in the current process ------------------------------------------------


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _bytes_moved(fn: Any, inputs: tuple[Any, ...], out: Any) -> int:
    tensors = _tensors(inputs) + _tensors(out)
    if isinstance(fn, torch.nn.Module):
        tensors += list(fn.parameters()) + list(fn.buffers())
    seen: dict[int, int] = {}
    for t in tensors:  # count each storage once (views of one input are one read)
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _compare(out: Any, ref: Any, rtol: float, atol: float) -> dict[str, Any]:
    outs, refs = _tensors(out), _tensors(ref)
    if len(outs) != len(refs):
        return {"ok": False, "max_abs_err": None, "why": f"{len(outs)} outputs, eager {len(refs)}"}
    worst, ok = 0.0, True
    for o, r in zip(outs, refs):
        if o.shape != r.shape:
            return {
                "ok": False,
                "max_abs_err": None,
                "why": f"shape {list(o.shape)} vs {list(r.shape)}",
            }
        o, r = o.double(), r.double()
        worst = max(worst, (o - r).abs().max().item() if o.numel() else 0.0)
        ok = ok and torch.allclose(o, r, rtol=rtol, atol=atol, equal_nan=True)
    return {"ok": ok, "max_abs_err": worst, "why": None if ok else f"max abs err {worst:.3g}"}


def _shapes(inputs: tuple[Any, ...]) -> str:
    return " ".join("x".join(map(str, t.shape)) or "scalar" for t in _tensors(inputs))


def _load(name: str, device: str, small: bool) -> tuple[Any, tuple[Any, ...], Any]:
    if small:
        snippet = load_snippet(case_table.SAMPLES_DIR / f"{name}.py", device=device)
        return snippet.entry, snippet.example_inputs, None
    case = case_table.by_name([name])[0]
    fn, inputs = case.make(device)
    return fn, inputs, case.bytes_moved


def _measure_compiled(
    label: str, fn: Any, inputs: tuple[Any, ...], ref: Any, backend: Any, args: argparse.Namespace
) -> dict[str, Any]:
    res: dict[str, Any] = {}
    try:
        torch._dynamo.reset()  # each backend compiles from scratch, nothing shared
        compiled = torch.compile(fn, backend=backend)
        out = compiled(*inputs)
        res["check"] = _compare(out, ref, args.rtol, args.atol)
        res["ms"] = median_ms(lambda: compiled(*inputs), args.device, args.warmup, args.rep)
        res["kernels"] = count_kernels(lambda: compiled(*inputs), args.device)
    except Exception as e:  # noqa: BLE001 - a failing backend is a row, not a crash
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        res["error"] = f"{type(e).__name__}: {first}"[:300]
        print(f"[{label}] {traceback.format_exc()}", file=sys.stderr)
    return res


def _kernelscope_backend() -> tuple[Any, str | None]:
    try:
        from compiler import backend as ks_backend
    except Exception as e:  # noqa: BLE001 - report it in every row instead
        return None, f"import compiler failed: {type(e).__name__}: {e}"
    return ks_backend, None


def measure(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Everything the table says about one case."""
    torch.manual_seed(0)
    fn, inputs, bytes_fn = _load(name, args.device, args.small)
    row: dict[str, Any] = {"case": name, "shapes": _shapes(inputs)}
    with torch.no_grad():
        ref = fn(*inputs)
        row["bytes"] = bytes_fn(inputs, ref) if bytes_fn else _bytes_moved(fn, inputs, ref)
        row["eager"] = {
            "ms": median_ms(lambda: fn(*inputs), args.device, args.warmup, args.rep),
            "kernels": count_kernels(lambda: fn(*inputs), args.device),
        }
        # Inductor first: a Kernelscope kernel that faults poisons the CUDA context, and
        # should cost only its own column.
        if args.inductor:
            row["inductor"] = _measure_compiled("inductor", fn, inputs, ref, "inductor", args)
        ks_backend, why = _kernelscope_backend()
        row["kernelscope"] = (
            _measure_compiled("kernelscope", fn, inputs, ref, ks_backend, args)
            if ks_backend
            else {"error": why}
        )
    return row


# ---- many cases, one process each ----------------------------------------------------


def _child_argv(name: str, args: argparse.Namespace) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "benchmarks.run",
        "--child",
        name,
        "--device",
        args.device,
        "--warmup",
        str(args.warmup),
        "--rep",
        str(args.rep),
        "--rtol",
        str(args.rtol),
        "--atol",
        str(args.atol),
    ]
    return argv + (["--small"] if args.small else []) + ([] if args.inductor else ["--no-inductor"])


def run_isolated(name: str, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    )
    try:
        proc = subprocess.run(
            _child_argv(name, args),
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
            timeout=args.case_timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"case": name, "failed": f"timed out after {args.case_timeout} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_TAG):
            return json.loads(line[len(RESULT_TAG) :])
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit {proc.returncode}"
    return {"case": name, "failed": f"crashed ({how}), see stderr"}


# ---- the report ----------------------------------------------------------------------


def _ms(res: dict[str, Any] | None) -> float | None:
    return res.get("ms") if res else None


def _fmt_ms(ms: float | None) -> str:
    return "—" if ms is None else f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "—" if not a or not b else f"{a / b:.2f}x"


def _kernels(row: dict[str, Any]) -> str:
    parts = [(row.get(k) or {}).get("kernels") for k in ("eager", "kernelscope", "inductor")]
    return "/".join("—" if n is None else str(n) for n in parts)


def _check(row: dict[str, Any]) -> str:
    if "failed" in row:
        return f"**{row['failed']}**"
    ks = row.get("kernelscope") or {}
    if "error" in ks:
        return f"**error**: {ks['error']}".replace("|", "\\|")
    check = ks.get("check") or {}
    return "ok" if check.get("ok") else f"**mismatch**: {check.get('why')}"


def table(rows: list[dict[str, Any]], peak_gbps: float | None) -> str:
    head = (
        "| case | shapes | eager ms | kernelscope ms | inductor ms | kernels e/ks/ind "
        "| ks vs eager | ks vs inductor | ks GB/s | % of peak | check |"
    )
    lines = [head, "|" + "---|" * 11]
    for row in rows:
        eager, ks, ind = (_ms(row.get(k)) for k in ("eager", "kernelscope", "inductor"))
        gbps = row["bytes"] / (ks * 1e-3) / 1e9 if ks and row.get("bytes") else None
        pct = f"{100 * gbps / peak_gbps:.0f}%" if gbps and peak_gbps else "—"
        lines.append(
            " | ".join(
                [
                    f"| {row['case']}",
                    row.get("shapes", ""),
                    _fmt_ms(eager),
                    _fmt_ms(ks),
                    _fmt_ms(ind),
                    _kernels(row),
                    _ratio(eager, ks),
                    _ratio(ind, ks),
                    "—" if gbps is None else f"{gbps:.0f}" if gbps >= 100 else f"{gbps:.1f}",
                    pct,
                    _check(row) + " |",
                ]
            )
        )
    return "\n".join(lines)


def _run(cmd: list[str]) -> str | None:
    try:
        return (
            subprocess.run(
                cmd, capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


def environment(device: str) -> dict[str, Any]:
    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device,
        "cuda": torch.version.cuda,
    }
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
    env["commit"] = (
        os.environ.get("KERNELSCOPE_COMMIT")
        or _run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
        or "unknown"
    )
    return env


def section(
    rows: list[dict[str, Any]],
    env: dict[str, Any],
    peak: float | None,
    args: argparse.Namespace,
    command: str,
) -> str:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    where = env.get("gpu") or f"CPU ({env.get('cpu')})"
    timing = (
        "triton.testing.do_bench median" if args.device.startswith("cuda") else "wall-clock median"
    ) + f", warmup {args.warmup} ms, rep {args.rep} ms"
    peak_text = f"{peak:.0f} GB/s" if peak else "not measured"
    return "\n".join(
        [
            f"## {when} · {where}",
            "",
            f"- command: `{command}`",
            f"- device: {where}; driver {env.get('driver') or '—'}, CUDA {env.get('cuda') or '—'}; "
            + f"measured copy bandwidth (peak): {peak_text}",
            f"- torch {env['torch']}, triton {env.get('triton') or '—'}, "
            + f"Python {env['python']}, kernelscope commit {env['commit']}",
            f"- timing: {timing}; kernels: CUDA kernels per call (torch.profiler); "
            + "GB/s: bytes of inputs and outputs over Kernelscope's time",
            "",
            table(rows, peak),
            "",
        ]
    )


def _cases(args: argparse.Namespace) -> list[str]:
    wanted = [n for n in (args.cases or "").split(",") if n]
    if args.small:
        known = [p.stem for p in sample_paths() if p.stem not in SMALL_SKIP]
        missing = sorted(set(wanted) - set(known))
        if missing:
            raise SystemExit(f"unknown sample(s): {', '.join(missing)}")
        return wanted or known
    return [c.name for c in case_table.by_name(wanted)]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--device", default="cuda")
    p.add_argument(
        "--out",
        default=str(ROOT / "docs" / "perf.md"),
        help="Markdown file to append the dated section to; '-' for none",
    )
    p.add_argument("--json", default=None, help="also write the raw results here")
    p.add_argument("--small", action="store_true", help="the samples' own example inputs")
    p.add_argument("--no-inductor", dest="inductor", action="store_false")
    p.add_argument("--warmup", type=int, default=25, help="ms of warmup per timing")
    p.add_argument("--rep", type=int, default=100, help="ms of timed calls per timing")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3)
    p.add_argument(
        "--no-isolate",
        dest="isolate",
        action="store_false",
        help="run every case in this process (faster, less robust)",
    )
    p.add_argument("--case-timeout", type=int, default=300, help="seconds per case")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child:
        print(RESULT_TAG + json.dumps(measure(args.child, args)), flush=True)
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here; use --device cpu --small for a quick check")
    names = _cases(args)
    env = environment(args.device)
    peak = None
    if args.device.startswith("cuda"):
        from benchmarks.bandwidth import copy_gbps

        peak = copy_gbps(args.device)
    rows: list[dict[str, Any]] = []
    runner: Callable[[str, argparse.Namespace], dict[str, Any]] = (
        run_isolated if args.isolate else measure
    )
    for name in names:
        print(f"-- {name}", file=sys.stderr, flush=True)
        rows.append(runner(name, args))
        if args.json:  # after every case, so a run cut short keeps what it measured
            raw = {"env": env, "peak_gbps": peak, "rows": rows}
            Path(args.json).write_text(json.dumps(raw, indent=1))
    command = "PYTHONPATH=. python benchmarks/run.py " + shlex.join(argv or sys.argv[1:])
    text = section(rows, env, peak, args, command.strip())
    print(text)
    if args.out != "-":
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a") as f:
            f.write(("\n" if out.stat().st_size else "") + text)
        print(f"appended to {out}", file=sys.stderr)
    bad = [r["case"] for r in rows if _check(r) != "ok"]
    if bad:
        print(f"Kernelscope failed or mismatched on: {', '.join(bad)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
