"""Compile-time report: cold, warm and restarted compiles, Inductor against Kernelscope.

    python -m benchmarks.compile_time --device cpu                  # small models + samples
    python -m benchmarks.compile_time --device cpu --items model:bert,sample:softmax
    python -m benchmarks.compile_time --device cpu --ks-backend triton   # the interpreter
    python -m benchmarks.compile_time --device cuda --items hf:bert_base,hf:gpt2_small

Items: `model:NAME` (tests/models/small_models.py, plain torch), `sample:NAME` (samples/),
`hf:NAME` (benchmarks/models.py, transformers/torchvision). Each (item, compiler) runs in a
process of its own with every on-disk cache empty (Inductor's, Triton's, Kernelscope's):
"cold" is the first call of the compiled function there; "warm" is the first call again
after `torch._dynamo.reset()` in that process, with the caches the cold compile filled
(the definition docs/perf.md uses); "restart" is the first call in a new process over the
same caches (a user running the script again). For Kernelscope the report also gives the
seconds spent inside the backend call (AOTAutograd plus our stages; the rest is Dynamo and
the first run) and what the whole-graph cache did per graph. Every first call is checked
against eager. Timings are wall clock on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen import targets

ROOT = Path(__file__).resolve().parent.parent
TAG = "KSCOMPILE "
PHASES = ("cold", "warm")


def default_items(device: str) -> list[str]:
    if device.startswith("cuda"):
        return ["hf:bert_base", "hf:gpt2_small"]
    sys.path.insert(0, str(ROOT / "tests" / "models"))
    from small_models import NAMES

    from benchmarks.snippet import sample_paths

    return [f"model:{n}" for n in NAMES] + [f"sample:{p.stem}" for p in sample_paths()
                                            if p.stem != "training_step"]


def _load(item: str, device: str) -> tuple[Any, tuple[Any, ...], float]:
    """The item's callable, its inputs and the check's tolerance (relative norm)."""
    kind, name = item.split(":", 1)
    if kind == "model":
        sys.path.insert(0, str(ROOT / "tests" / "models"))
        from small_models import make

        model, inp = make(name, device)
        return model, (inp,), 1e-4
    if kind == "hf":
        from benchmarks import models

        m = models.by_name([name])[0]
        module, x = m.make(device)
        return module, (x,), 3e-2
    from benchmarks.snippet import SAMPLES_DIR, load_snippet

    snip = load_snippet(SAMPLES_DIR / f"{name}.py", device)
    return snip.entry, snip.example_inputs, 1e-4


def _rel_err(out: Any, ref: Any) -> float:
    import torch
    import torch.utils._pytree as pytree

    outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    refs = [t for t in pytree.tree_leaves(ref) if isinstance(t, torch.Tensor)]
    if len(outs) != len(refs):
        return float("inf")
    errs = [((o.double() - r.double()).norm() / (r.double().norm() or 1.0)).item()
            if o.shape == r.shape else float("inf") for o, r in zip(outs, refs)]
    return max(errs, default=0.0)


def child(item: str, compiler: str, device: str, phases: list[str], ks: dict[str, Any]
          ) -> dict[str, Any]:
    """Compile and first-call the item once per phase, in this process."""
    import torch

    from benchmarks.timing import sync

    fn, inputs, tol = _load(item, device)
    torch.manual_seed(0)
    with torch.no_grad():
        ref = fn(*inputs)
    out: dict[str, Any] = {}
    for phase in phases:
        torch._dynamo.reset()
        spent = [0.0]
        sink: list[Any] = []
        if compiler == "inductor":
            backend: Any = "inductor"
        else:
            from kernelscope.compiler.compile_fx import make_backend
            from kernelscope.compiler.options import CompileOptions

            inner = make_backend(CompileOptions.from_mapping(ks), sink=sink)

            def backend(gm: Any, example_inputs: Any, inner: Any = inner) -> Any:
                t = time.perf_counter()
                try:
                    return inner(gm, example_inputs)
                finally:
                    spent[0] += time.perf_counter() - t

        compiled = torch.compile(fn, backend=backend)
        t0 = time.perf_counter()
        with torch.no_grad():
            got = compiled(*inputs)
        sync(device)
        row: dict[str, Any] = {"s": round(time.perf_counter() - t0, 3)}
        if compiler != "inductor":
            row["backend_s"] = round(spent[0], 3)
            statuses = [getattr(c, "graph_cache", {}).get("status", "none") for c in sink]
            row["graph_cache"] = {s: statuses.count(s) for s in sorted(set(statuses))}
        err = _rel_err(got, ref)
        row["ok"] = err <= tol
        row["rel_err"] = float(f"{err:.3g}")
        out[phase] = row
    return out


def _env(scratch: str, emulator: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(scratch, "inductor")
    env["TRITON_CACHE_DIR"] = os.path.join(scratch, "triton")
    env["KERNELSCOPE_CACHE"] = os.path.join(scratch, "kernelscope")
    env.update(emulator)
    return env


def _spawn(item: str, compiler: str, args: argparse.Namespace, phases: list[str],
           scratch: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.compile_time", "--child", item,
           "--compiler", compiler, "--device", args.device, "--phases", ",".join(phases),
           "--ks-options", json.dumps(_ks_options(args))]
    # The environment the backend's target row asks for on this device (the Triton
    # interpreter for Triton on the CPU), set before the child imports Triton.
    device = "cuda" if args.device.startswith("cuda") else args.device
    emulator = targets.emulator_env(args.ks_backend, device) if compiler == "kernelscope" else {}
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=_env(scratch, emulator), text=True,
                              stdout=subprocess.PIPE, timeout=args.timeout, check=False)
    except subprocess.TimeoutExpired:
        return {p: {"error": f"timed out after {args.timeout} s"} for p in phases}
    for line in proc.stdout.splitlines():
        if line.startswith(TAG):
            return dict(json.loads(line[len(TAG):]))
    return {p: {"error": f"exit {proc.returncode}, see stderr"} for p in phases}


def _ks_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {"backend": args.ks_backend}
    if args.device.startswith("cuda"):
        opts["device"] = "cuda"
    return opts


def measure(item: str, compiler: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kscompile-") as scratch:
        res = _spawn(item, compiler, args, list(PHASES), scratch)
        if args.restart:
            res.update(_spawn(item, compiler, args, ["restart"], scratch))
    print(f"-- {item} {compiler}: {json.dumps(res)}", file=sys.stderr, flush=True)
    return res


def _cell(res: dict[str, Any], phase: str, split: bool) -> str:
    r = res.get(phase, {})
    if "error" in r:
        return f"error: {r['error']}"
    if "s" not in r:
        return "—"
    text = f"{r['s']:.2f}"
    if split and "backend_s" in r:
        text += f" ({r['backend_s']:.2f})"
    return text + ("" if r.get("ok", True) else " **mismatch**")


def table(rows: list[dict[str, Any]], restart: bool) -> str:
    phases = [*PHASES, "restart"] if restart else list(PHASES)
    head = ["item"] + [f"Inductor {p} s" for p in phases] + \
        [f"Kernelscope {p} s (in backend)" for p in phases] + ["KS graph cache, warm"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        ind, ks = row.get("inductor", {}), row.get("kernelscope", {})
        warm_cache = ks.get("warm", {}).get("graph_cache", {})
        cells = [row["item"]] + [_cell(ind, p, False) for p in phases] + \
            [_cell(ks, p, True) for p in phases] + \
            [", ".join(f"{n} {s}" for s, n in warm_cache.items()) or "—"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compile_time", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--items", default="", help="comma-separated (default: the device's set)")
    p.add_argument("--compilers", default="inductor,kernelscope")
    p.add_argument("--ks-backend", default="auto", help="Kernelscope's backend option")
    p.add_argument("--no-restart", dest="restart", action="store_false",
                   help="skip the compile in a new process over warm caches")
    p.add_argument("--timeout", type=int, default=900, help="seconds per process")
    p.add_argument("--jobs", type=int, default=1,
                   help="processes at once (their compiles then share the machine)")
    p.add_argument("--json", default=None, help="rows, rewritten after every item")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--compiler", default="kernelscope", help=argparse.SUPPRESS)
    p.add_argument("--phases", default="cold,warm", help=argparse.SUPPRESS)
    p.add_argument("--ks-options", default="{}", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child:
        res = child(args.child, args.compiler, args.device, args.phases.split(","),
                    json.loads(args.ks_options))
        print(TAG + json.dumps(res), flush=True)
        return 0
    items = [i for i in args.items.split(",") if i] or default_items(args.device)
    rows: list[dict[str, Any]] = [{"item": i} for i in items]
    done = threading.Lock()

    def one(job: tuple[int, str]) -> None:
        res = measure(items[job[0]], job[1], args)
        with done:
            rows[job[0]][job[1]] = res
            if args.json:  # after every process, so a run cut short keeps what it measured
                Path(args.json).write_text(json.dumps(rows, indent=1))

    jobs = [(i, c) for i in range(len(items)) for c in args.compilers.split(",")]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        list(pool.map(one, jobs))
    print(table(rows, args.restart))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
