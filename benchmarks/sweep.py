"""Block-size sweeps and option variants on the GPU, in one process, Kernelscope only.

    python -m benchmarks.sweep --json OUT/sweep.json [--only cos_sin,col_sum] [--profile]

Each variant replaces one of the Triton codegen's block rules (compiler/codegen/triton.py:
`block_config` for pointwise and looped reductions, `column_config` for column sums) by a
fixed choice, or passes compile options (attention_to_sdpa), then compiles the suite case
afresh, checks it against eager at the case's tolerance and times it as the runner does
(do_bench median). The point is to choose the rules from measurements: the chosen rule
and the numbers go to docs/perf.md. `--profile` adds the top kernels of a few cases
(torch.profiler), eager, Inductor and Kernelscope.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from benchmarks import cases as case_table
from benchmarks.measure import compare, kernelscope
from benchmarks.timing import median_ms


@contextmanager
def _rule(name: str, override: dict[str, int] | None) -> Iterator[None]:
    """Replace triton.<name> (a config rule) by one that forces `override`'s fields on the
    kernels it decides (looped ones only, for block_config on reductions)."""
    from compiler.codegen import triton as tr

    if not override:
        yield
        return
    persistent = name == "persistent_config"  # block_config, on persistent reductions
    name = "block_config" if persistent else name
    orig = getattr(tr, name)

    def forced(plan: Any, *a: Any) -> dict[str, Any]:
        cfg = dict(orig(plan, *a))
        looped = plan.kind == "reduction" and not cfg["persistent"]
        if persistent:
            hit = plan.kind == "reduction" and cfg["persistent"]
        else:
            hit = name == "column_config" or plan.kind == "pointwise" or looped
        if hit:
            cfg.update(override)
            cfg["grid"] = (-(-plan.xnumel // cfg["XBLOCK"]),)
        return cfg

    setattr(tr, name, forced)
    try:
        yield
    finally:
        setattr(tr, name, orig)


def _pw(x: int, w: int) -> dict[str, int]:
    return {"XBLOCK": x, "num_warps": w}


def _red(x: int, r: int, w: int) -> dict[str, int]:
    return {"XBLOCK": x, "RBLOCK": r, "num_warps": w}


LOOPED = [None, _red(1, 4096, 8), _red(1, 4096, 16), _red(1, 1024, 4), _red(1, 2048, 4),
          _red(2, 1024, 8), _red(1, 8192, 16)]
# (case, rule, overrides, options)
SWEEPS: list[tuple[str, str, list[dict[str, int] | None], dict[str, Any]]] = [
    ("cos_sin", "block_config", [None, _pw(1024, 4), _pw(2048, 8), _pw(512, 4), _pw(2048, 4),
                                 _pw(4096, 8)], {}),
    ("col_sum", "column_config", [None, _red(64, 64, 8), _red(16, 256, 8), _red(8, 512, 8),
                                  _red(32, 128, 4), _red(64, 128, 8), _red(16, 128, 4)], {}),
    ("softmax_wide", "block_config", LOOPED, {}),
    ("cross_entropy", "block_config", LOOPED, {}),
    ("square_sum", "block_config", [None, _red(1, 4096, 8), _red(1, 2048, 8)], {}),
    ("softmax", "block_config", [None], {}),
    ("rmsnorm_bf16", "persistent_config", [None, _pw(1, 4), _pw(1, 16), _pw(2, 8), _pw(2, 16)],
     {}),
    ("layer_norm_manual", "persistent_config", [None, _pw(1, 4), _pw(1, 16), _pw(2, 16)], {}),
    ("softmax", "persistent_config", [None, _pw(1, 4), _pw(1, 16), _pw(2, 16)], {}),
    ("adam", "block_config", [None], {}),
    ("attention", "block_config", [None], {"attention_to_sdpa": True}),
    ("attention", "block_config", [None], {"attention_to_sdpa": False}),
    ("gpt2_block", "block_config", [None], {"attention_to_sdpa": True}),
    ("gpt2_block", "block_config", [None], {"attention_to_sdpa": False}),
]


def _variant(case: case_table.Case, rule: str, override: dict[str, int] | None,
             options: dict[str, Any], fn: Any, inputs: tuple[Any, ...], ref: Any
             ) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case.name, "rule": rule, "override": override,
                           "options": options}
    try:
        with _rule(rule, override):
            torch._dynamo.reset()
            compiled = torch.compile(fn, backend=kernelscope(options or None))
            args = copy.deepcopy(inputs) if case.mutates else inputs
            t0 = time.perf_counter()
            out = compiled(*args)
            torch.cuda.synchronize()
            row["compile_s"] = round(time.perf_counter() - t0, 2)
            row["check"] = compare(args if case.mutates else out, ref, case.tol)
            row["ms"] = median_ms(lambda: compiled(*args), "cuda")
    except Exception as e:  # noqa: BLE001 - one row per variant
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    return row


def _case_inputs(case: case_table.Case) -> tuple[Any, tuple[Any, ...], Any, float]:
    """fn, inputs, eager's result and eager's time. For in-place cases `inputs` stay as
    made (eager is timed on a copy): each variant checks a copy of them against `ref`."""
    torch.manual_seed(0)
    fn, inputs = case.make("cuda", "gpu")
    with torch.no_grad():
        if case.mutates:
            ref_args = copy.deepcopy(inputs)
            fn(*ref_args)
            ref = ref_args
        else:
            ref = fn(*inputs)
    scratch = copy.deepcopy(inputs) if case.mutates else inputs
    eager = median_ms(lambda: fn(*scratch), "cuda")
    return fn, inputs, ref, eager


def profile(names: list[str], top: int = 8) -> dict[str, str]:
    """torch.profiler's CUDA kernel table per case and column."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as prof_

    out: dict[str, str] = {}
    for name in names:
        case = case_table.by_name([name])[0]
        fn, inputs, _ref, _ = _case_inputs(case)
        for label, kw in (("eager", None), ("inductor", {"backend": "inductor"}),
                          ("kernelscope", {"backend": kernelscope()})):
            torch._dynamo.reset()
            f = fn if kw is None else torch.compile(fn, **kw)
            with torch.no_grad():
                for _ in range(3):
                    f(*inputs)
                torch.cuda.synchronize()
                with prof_(activities=[ProfilerActivity.CUDA]) as p:
                    for _ in range(5):
                        f(*inputs)
                    torch.cuda.synchronize()
            out[f"{name}/{label}"] = p.key_averages().table(
                sort_by="cuda_time_total", row_limit=top, max_name_column_width=70)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="sweep.json")
    ap.add_argument("--only", default="", help="comma list of cases")
    ap.add_argument("--profile", default="", help="comma list of cases to profile")
    args = ap.parse_args(argv)
    only = {c for c in args.only.split(",") if c}
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "rows": rows}
    with torch.no_grad():
        for name, rule, overrides, options in SWEEPS:
            if only and name not in only:
                continue
            case = case_table.by_name([name])[0]
            fn, inputs, ref, eager = _case_inputs(case)
            for override in overrides:
                row = _variant(case, rule, override, options, fn, inputs, ref)
                row["eager_ms"] = eager
                rows.append(row)
                print(json.dumps(row), flush=True)
                with open(args.json, "w") as f:
                    json.dump(result, f, indent=1)
            del fn, inputs, ref
            torch.cuda.empty_cache()
    if args.profile:
        result["profiles"] = profile([c for c in args.profile.split(",") if c])
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        for k, v in result["profiles"].items():
            print(f"== {k}\n{v}")
    print(f"{'case':<14} {'override':<40} {'options':<28} {'ms':>8} check")
    for r in rows:
        check = r.get("error") or ("ok" if r["check"]["ok"] else r["check"].get("why"))
        print(f"{r['case']:<14} {json.dumps(r['override']):<40} {json.dumps(r['options']):<28} "
              f"{r.get('ms', float('nan')):8.3f} {check} (eager {r['eager_ms']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
