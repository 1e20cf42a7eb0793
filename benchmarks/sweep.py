"""Block-size sweeps and option variants on the GPU, in one process, Kernelscope only.

    python -m benchmarks.sweep --json OUT/sweep.json [--only cos_sin,col_sum] [--set shapes]
                               [--profile case,...]

Each variant replaces one of the Triton codegen's rules (compiler/codegen/triton/rules.py:
`block_config` for pointwise and looped reductions, `column_config` for column sums, the
rule constants such as LSE_STEP) by a fixed choice, or passes compile options
(attention_to_sdpa), then compiles the suite case afresh (with an empty compile cache of
its own), checks it against eager at the case's tolerance and times it as the runner does
(do_bench median). The point is to choose the rules from measurements: the chosen rule
and the numbers go to docs/perf.md. `--profile` adds the top kernels of a few cases
(torch.profiler), eager, Inductor and Kernelscope.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from benchmarks import cases as case_table
from benchmarks.measure import compare, kernelscope
from benchmarks.timing import median_ms

BLOCK_FIELDS = ("XBLOCK", "RBLOCK", "num_warps")


@contextmanager
def _rule(name: str, override: dict[str, Any] | None) -> Iterator[None]:
    """Replace triton_rules.<name> (a config rule) by one that forces `override`'s block
    fields on the kernels it decides (looped ones only, for block_config on reductions);
    `override`'s other keys name rule constants of triton_rules (LSE_STEP, ...), set for
    the variant."""
    from kernelscope.compiler.codegen.triton import rules as tr

    override = override or {}
    fields = {k: v for k, v in override.items() if k in BLOCK_FIELDS}
    constants = {k: v for k, v in override.items() if k not in BLOCK_FIELDS}
    persistent = name == "persistent_config"  # block_config, on persistent reductions
    name = "block_config" if persistent else name
    orig = getattr(tr, name)
    saved = {k: getattr(tr, k) for k in constants}  # AttributeError: no such rule

    def forced(plan: Any, *a: Any) -> dict[str, Any]:
        cfg = dict(orig(plan, *a))
        looped = plan.kind.reduces and not cfg["persistent"]
        if persistent:
            hit = plan.kind.reduces and cfg["persistent"]
        else:
            hit = name == "column_config" or not plan.kind.reduces or looped
        if hit:
            cfg.update(fields)
            cfg["grid"] = (-(-plan.xnumel // cfg["XBLOCK"]),)
        return cfg

    if fields:
        setattr(tr, name, forced)
    for k, v in constants.items():
        setattr(tr, k, v)
    try:
        yield
    finally:
        setattr(tr, name, orig)
        for k, v in saved.items():
            setattr(tr, k, v)


def compile_variant(fn: Any, options: dict[str, Any], cache_dir: str) -> Any:
    """fn for torch.compile afresh: a new Dynamo state and a compile cache of its own
    (the whole-graph cache's key does not see a swapped rule, so with a shared cache every
    variant after the first ran the first one's kernels)."""
    torch._dynamo.reset()
    return torch.compile(fn, backend=kernelscope({**options, "cache_dir": cache_dir}))


def _pw(x: int, w: int) -> dict[str, int]:
    return {"XBLOCK": x, "num_warps": w}


def _red(x: int, r: int, w: int) -> dict[str, int]:
    return {"XBLOCK": x, "RBLOCK": r, "num_warps": w}


LOOPED = [None, _red(1, 4096, 8), _red(1, 4096, 16), _red(1, 1024, 4), _red(1, 2048, 4),
          _red(2, 1024, 8), _red(1, 8192, 16)]


def _step(name: str) -> dict[str, str]:
    """One logsumexp step for every grid (triton_rules.lse_step)."""
    return {"LSE_STEP": name, "LSE_STEP_FEW_ROWS": name}


# The kernels' code before the 15:08 sweep: two exps per logsumexp step, every mask
# computed.
_OLD_SHAPE = {**_step("two_exp"), "FULL_BLOCK_MASKS": False}
# (case, rule, overrides, options)
SWEEPS: list[tuple[str, str, list[dict[str, Any] | None], dict[str, Any]]] = [
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
# The code-shape rules of triton_rules (15:08 the first sweep of them; these are the
# variants left to measure against the rules chosen from it).
SHAPE_SWEEPS: list[tuple[str, str, list[dict[str, Any] | None], dict[str, Any]]] = [
    ("cross_entropy", "block_config", [None, _OLD_SHAPE, _step("one_exp"), _step("one_exp2"),
                                       _red(1, 2048, 16)], {}),
    ("softmax_wide", "block_config", [None, _OLD_SHAPE, _step("diff_exp2"),
                                      {**_step("diff_exp2"), **_red(1, 8192, 16)}], {}),
    ("rmsnorm_bf16", "persistent_config", [None, _OLD_SHAPE, _pw(4, 16), _pw(2, 16),
                                           _pw(1, 16)], {}),
    ("softmax", "persistent_config", [None, _OLD_SHAPE], {}),
    ("cos_sin", "block_config", [None, {"FULL_BLOCK_MASKS": False}], {}),
]
# The training steps' backward kernels: column tiles of the split first passes (a bf16
# tile of 16 columns reads 32 bytes a row) and the layer-norm backward's row kernel.
BACKWARD_SWEEPS: list[tuple[str, str, list[dict[str, Any] | None], dict[str, Any]]] = [
    ("gelu_bias_grad", "column_config", [None, _red(32, 128, 4), _red(32, 128, 8),
                                         _red(64, 64, 8), _red(8, 512, 8)], {}),
    ("layernorm_backward", "column_config", [None, _red(32, 128, 4), _red(32, 128, 8),
                                             _red(64, 64, 8)], {}),
    ("layernorm_backward", "persistent_config", [None, _pw(1, 4), _pw(1, 8), _pw(4, 8)], {}),
]
SETS = {"blocks": SWEEPS, "shapes": SHAPE_SWEEPS, "backward": BACKWARD_SWEEPS,
        "all": SWEEPS + SHAPE_SWEEPS}


def _variant(case: case_table.Case, rule: str, override: dict[str, Any] | None,
             options: dict[str, Any], fn: Any, inputs: tuple[Any, ...], ref: Any
             ) -> dict[str, Any]:
    row: dict[str, Any] = {"case": case.name, "rule": rule, "override": override,
                           "options": options}
    try:
        with _rule(rule, override), tempfile.TemporaryDirectory(prefix="kssweep-") as cache:
            compiled = compile_variant(fn, options, cache)
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
    ap.add_argument("--set", default="all", choices=sorted(SETS), help="which sweeps")
    args = ap.parse_args(argv)
    only = {c for c in args.only.split(",") if c}
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "rows": rows}
    with torch.no_grad():
        for name, rule, overrides, options in SETS[args.set]:
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
