"""docs/coverage.md from the sweep's result files (docs/coverage/<target>.jsonl).

In: one JSON line per case (op, dtype, sample, status, reason) per target, and the target's
`.meta.json` (date, versions, command). Out: a Markdown page with the totals per target and
one row per op: its status on each target, the dtypes that are not native, and a reason.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from opinfo_harness import STATUS_ORDER, aggregate

ORDER = ["cpp", "triton-interpret", "cuda"]
GRAD_INTRO = [
    "Every op of `op_db` with autograd support (`supports_autograd`), its first samples",
    "made with `requires_grad=True` (float32; an op without a float32 backward at its",
    "first of float64, float16, bfloat16), as Inductor's `test_comprehensive` checks",
    "gradients: the outputs that require grad get seeded random cotangents of unit norm,",
    "and `torch.autograd.grad` gives every input's gradient, eager against compiled",
    "(AOTAutograd's forward and backward graphs, both compiled by Kernelscope). An op is",
    "native only if both graphs were lowered with the ATen fallback off; gradients at the",
    "forward sweep's tolerances. Random ops' gradients (dropout's mask) are compared by",
    "shape and dtype. `grad_harness.py` is the harness; the CI tier runs a fixed slice",
    "(`tests/opinfo/test_grad_slice.py`). `cpp-before` is the first full pass, before the",
    "fixes it led to (a saved stride-0 view returned contiguous; a reduction over one",
    "element fused into another reduction's loop).",
    "",
    'The H200 (`cuda`) row is the run of 2026-12-02 01:44 on main 3a09a56, with the open',
    'ops re-run at 06:50 on main aedec70 (merged):',
    '- `as_strided_scatter`, `as_strided_copy` (error at 01:44): a fused group whose buffers',
    '  nothing reads was emitted as a Triton launch with no arguments (a SyntaxError in the',
    '  wrapper). Fixed in the scheduler (such a group is no kernel); reproduced and tested',
    '  under the Triton interpreter (`tests/core/test_dead_kernel.py`). Not re-run on the H200.',
    '- `half` (mismatch at 01:44, one element by 0.992): native at 06:50, f32 and f16; not',
    '  reproduced anywhere since (interpreter, C++, H200).',
    '- `logcumsumexp` (mismatch at 01:44, 4 of 125 gradient elements by 2.6e-4): our',
    "  gradient is closer to float64 than eager's (2.3e-4 against 2.5e-4 off). float32",
    '  gradients that differ from eager are now judged against a float64 reference, as',
    "  Inductor's fp64 check does: native.",
    '- `_flash_attention_forward`, `_efficient_attention_forward` (mismatch at 01:44, output',
    "  2: the philox seed/offset state): the gradient sweep now compares the generator's",
    '  state by shape and dtype, as the forward sweep does: fallback (no lowering).',
    'Not yet recorded: the f16/bf16/f64/i32/i64/bool forward sweep on the H200, and the',
    "gradient sweep's second samples (`--samples 2`; the passes here ran the first sample of",
    'each op). The commands below record them.',
    "",
    "```",
    "python tests/opinfo/sweep.py --mode grad --device cpu            # this table's cpp row",
    "python tests/opinfo/sweep.py --mode grad --device cuda           # on a GPU host",
    "python tests/opinfo/sweep.py --mode grad --device cpu --ops sum  # re-run ops (merged)",
    "```",
]


def _load(directory: Path) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    out = {}
    for path in sorted(directory.glob("*.jsonl")):
        target = path.stem
        meta_path = path.with_suffix(".meta.json")
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        out[target] = (meta, cases)
    def rank(stem: str) -> int:
        name = stem.removeprefix("grad-")
        return ORDER.index(name) if name in ORDER else 99

    return dict(sorted(out.items(), key=lambda kv: rank(kv[0])))


def _totals(ops: dict[str, dict[str, Any]], cases: list[dict[str, Any]],
            dtype: str | None = None) -> dict[str, int]:
    counts = {s: 0 for s in STATUS_ORDER}
    for entry in ops.values():
        if dtype is None:
            counts[entry["status"]] += 1
        elif dtype in entry["dtypes"]:
            counts[entry["dtypes"][dtype]] += 1
    return counts


def _ops_summary(run: dict[str, Any]) -> str:
    ops = str(run.get("ops", "all"))
    names = ops.split(",")
    return ops if len(names) < 6 else f"{len(names)} ops ({', '.join(names[:4])}, ...)"


def _command_summary(command: str) -> str:
    """A command with a long --ops list shortened (the .meta.json keeps it whole)."""
    def short(m: re.Match[str]) -> str:
        names = m.group(1).split(",")
        return m.group(0) if len(names) < 6 else f"--ops {','.join(names[:3])},... ({len(names)})"

    return re.sub(r"--ops (\S+)", short, command)


ZOO_SECTION = "zoo.md"  # the model zoo's section (tests/models/zoo_table.py), appended


def write_report(directory: Path, out: Path) -> Path:
    targets = _load(directory)
    lines = [
        "# OpInfo coverage",
        "",
        "Every entry of PyTorch's OpInfo database (`op_db`), its first samples per dtype,",
        "eager against `torch.compile(fn, backend=\"kernelscope\")`. Status per op is the worst",
        "over its cases: **native** (lowered by Kernelscope with the ATen fallback off, and",
        "equal to eager), **fallback** (correct, but some op went to ATen, with the reason),",
        "**mismatch** (a different answer), **error** (eager ran, we raised, timed out or",
        "crashed), **skip** (eager rejects every sample). float16/bfloat16 are compared as",
        "Inductor's `check_model` does (against a float32 reference where eager itself is",
        "off); random ops and uninitialized outputs by shape, dtype and statistics.",
        "",
        "Two reasons need a word:",
        "",
        "- *no graph captured (Dynamo ran it eagerly)*: TorchDynamo itself did not trace the",
        "  call (with its default settings, as a user's `torch.compile` gets them), so no graph",
        "  reached Kernelscope and eager PyTorch computed the result. It happens for ops whose",
        "  output shape or a Python value depends on the data (`nonzero`, `unique`,",
        "  `masked_select`, `item`, `equal`, `allclose`, `bincount`, `cov`, which checks its",
        "  weights with `equal`), for sparse tensors and for `resize_`. These ops count as",
        "  fallback, never as native. (OpInfo wraps random ops in `wrapper_set_seed`, whose RNG",
        "  freezing Dynamo cannot trace; the harness calls the op itself, so they reach us.)",
        "- *not swept: on cpu the op supports only ...*: none of the op's dtypes is one the",
        "  harness compares (complex-only or float8-only ops, ops with no CPU kernel). They are",
        "  listed, as skip, so every entry of op_db has a row. An op with none of the swept",
        "  dtypes but some other the harness compares (bitwise and integer ops in a float32",
        "  sweep) is swept at the first of int64, bool, float64, int32, float16, bfloat16 it",
        "  supports, and counted under that dtype in the per-dtype totals.",
        "- A zero-size result is allocated, not computed, and counts as native: `svd` and",
        "  `linalg.svd` are native here only because both of their first samples are 0x0",
        "  matrices (no SVD is lowered; a non-empty one goes to ATen).",
        "",
        "Regenerate (all targets present on the host; `--target cuda` on a GPU host):",
        "",
        "```",
        "python tests/opinfo/sweep.py                 # C++ and the Triton interpreter",
        "python tests/opinfo/sweep.py --target cuda   # on a GPU host",
        "python tests/opinfo/sweep.py --report-only   # rewrite this page from docs/coverage/",
        "python tests/opinfo/sweep.py --target cpp --dtypes f32 --ops abs,sum  # re-run ops",
        "```",
        "",
        "A run with `--ops` replaces only those ops' records (for the dtypes it ran) in",
        "docs/coverage/<target>.jsonl and keeps the rest; `--no-merge` rewrites the file.",
        "",
        "The CI tier runs a fixed slice of it: `tests/opinfo/test_opinfo_slice.py`.",
        "",
        "Whole models, a training step each, ours beside Inductor: [Model zoo](#model-zoo)",
        "at the end of this page.",
        "",
    ]
    forward = {t: v for t, v in targets.items() if not t.startswith("grad-")}
    grad = {t.removeprefix("grad-"): v for t, v in targets.items() if t.startswith("grad-")}
    lines += _tables(forward, "")
    if grad:
        lines += ["", "# Gradient sweep", "", *GRAD_INTRO, ""]
        lines += _tables(grad, "Gradient sweep: ")
    zoo = directory / ZOO_SECTION
    if zoo.is_file():  # tests/models/zoo_table.py --write writes it
        lines += ["", *zoo.read_text().rstrip("\n").splitlines()]
    out.write_text("\n".join(lines) + "\n")
    return out


def _tables(targets: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]],
            prefix: str) -> list[str]:
    """Totals per target, totals per dtype and the per-op table of one sweep."""
    lines = [
        f"## {prefix}Totals (ops)",
        "",
        "| target | date | torch | triton | GPU | dtypes | samples | native | fallback | "
        "mismatch | error | skip | cases | command |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    per_target: dict[str, dict[str, dict[str, Any]]] = {}
    for target, (meta, cases) in targets.items():
        ops = aggregate(cases)
        per_target[target] = ops
        t = _totals(ops, cases)
        lines.append(
            f"| {target} | {meta.get('date', '?')} | {meta.get('torch', '?')} | "
            f"{meta.get('triton', '?')} | {meta.get('gpu', '?')} | {meta.get('dtypes', '?')} | "
            f"{meta.get('samples', '?')} | {t['native']} | {t['fallback']} | {t['mismatch']} "
            f"| {t['error']} | {t['skip']} | {len(cases)} | `{meta.get('command', '?')}` |")
    lines.append("")
    for target, (meta, _cases) in targets.items():
        runs = meta.get("runs", [])
        if len(runs) < 2:
            lines.append(f"- {target}: ops swept: {meta.get('ops', 'all')}; "
                         f"{meta.get('seconds', '?')} s")
            continue
        lines.append(f"- {target}: ops swept: {meta.get('ops', 'all')}, merged from:")
        lines += [f"  - {run.get('date', '?')}: {_ops_summary(run)}; {run.get('seconds', '?')} s;"
                  f" `{_command_summary(str(run.get('command', '?')))}`" for run in runs]
    lines += ["", f"## {prefix}Totals per dtype (ops with at least one sample of that dtype)", "",
              "| target | dtype | native | fallback | mismatch | error | skip |",
              "|---|---|---|---|---|---|---|"]
    for target, (_meta, cases) in targets.items():
        ops = per_target[target]
        for dtype in ("f32", "f16", "bf16", "f64", "i32", "i64", "bool"):
            t = _totals(ops, cases, dtype)
            if sum(t.values()):
                lines.append(f"| {target} | {dtype} | {t['native']} | {t['fallback']} | "
                             f"{t['mismatch']} | {t['error']} | {t['skip']} |")
    names = sorted({op for ops in per_target.values() for op in ops})
    header = " | ".join(per_target)
    lines += ["", f"## {prefix}Per op", "",
              "Status per target; `dtypes` lists the dtypes that are not native on the first",
              "target, with their status; the reason is the worst case's.", "",
              f"| op | {header} | dtypes not native | reason |",
              "|---|" + "---|" * len(per_target) + "---|---|"]
    first = next(iter(per_target.values()), {})
    for name in names:
        cells = [per_target[t].get(name, {}).get("status", "-") for t in per_target]
        entry = first.get(name) or next(ops[name] for ops in per_target.values() if name in ops)
        odd = ", ".join(f"{d}: {s}" for d, s in sorted(entry["dtypes"].items())
                        if s not in ("native", "skip"))
        reason = next((per_target[t][name]["reason"] for t in per_target
                       if name in per_target[t] and per_target[t][name]["reason"]), "")
        reason = reason.replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| `{name}` | {' | '.join(cells)} | {odd} | {reason} |")
    return lines
