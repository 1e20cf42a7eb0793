"""Markdown tables for a benchmark run: the suite, the models, the per-call overheads.

What comes in: the rows `benchmarks.measure` returned (plain dicts, also what --json
writes) and the run's environment. What goes out: the dated section docs/perf.md keeps.
Ratios are Kernelscope's time over the other's, so below 1.00 Kernelscope is faster.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from benchmarks.stages import stages_table


def _ms(cell: dict[str, Any] | None) -> float | None:
    return (cell or {}).get("ms")


def fmt_ms(ms: float | None) -> str:
    return "—" if ms is None else f"{ms:.3f}" if ms < 100 else f"{ms:.1f}"


def _ratio(ks: float | None, other: float | None) -> str:
    return "—" if not ks or not other else f"{ks / other:.2f}"


# Models run bf16 through many layers: element-wise allclose fails Inductor as well as
# Kernelscope there, so a model matches when ||out - eager|| / ||eager|| is within this
# (Inductor's own error on the six models is 1e-4 to 1.6e-2).
MODEL_NORM_TOL = 3e-2
# The training step's target: geomean of KS / Inductor at most the first, no model
# above the second.
TRAIN_TARGET = (0.90, 1.00)


def _cell_error(cell: dict[str, Any] | None, model: bool = False) -> str | None:
    if not cell:
        return "not run"
    if "error" in cell:
        return "**error**: " + cell["error"].replace("|", "\\|")
    check = cell.get("check") or {}
    if model and "rel_err" in check:
        err = check["rel_err"]
        if "nan" in str(check.get("why", "")):  # runs before NaN counted as inf
            err = float("inf")
        return None if err <= MODEL_NORM_TOL else f"**mismatch**: rel err {err:.2g} " \
            f"(tol {MODEL_NORM_TOL:g})"
    if not check.get("ok", True):
        return f"**mismatch**: {check.get('why')}"
    return None


# Columns whose check goes into the row's check text (what they compute is the same step).
CHECKED = ("kernelscope", "inductor", "kernelscope_cg", "inductor_ro", "kernelscope_b")


def _is_model(row: dict[str, Any]) -> bool:
    return str(row.get("item", "")).startswith("model:")


def check_text(row: dict[str, Any]) -> str:
    if "failed" in row:
        return f"**{row['failed']}**"
    if "skipped" in row:
        return f"skipped: {row['skipped']}"
    problems = [f"{label}: {err}" for label in CHECKED
                if (label in row or label == "kernelscope")
                and (err := _cell_error(row.get(label), _is_model(row)))]
    ks = (row.get("kernelscope") or {}).get("check") or {}
    if problems:
        return "; ".join(problems)
    if "rel_err" not in ks:  # judged by a rule whose numbers have their own column
        return "ok"
    acc = f"ok (rel err {ks.get('rel_err', 0):.1e}"
    if "rel_err_fp64" in ks and row.get("eager_rel_err_fp64") is not None:
        acc += f"; vs fp64 {ks['rel_err_fp64']:.1e}, eager {row['eager_rel_err_fp64']:.1e}"
    if "rel_err_fp64" in ks and row.get("eager_rel_err_fp32") is not None:
        acc += (f"; vs a float32 copy {ks['rel_err_fp64']:.1e}, "
                f"eager {row['eager_rel_err_fp32']:.1e}")
    return acc + ")"


def is_ok(row: dict[str, Any]) -> bool:
    if str(row.get("item", "")).startswith("stages:"):  # compile times only: no check
        return "failed" not in row
    ours = ["kernelscope"] + (["kernelscope_b"] if "kernelscope_b" in row else [])
    return "failed" not in row and (
        "skipped" in row or all(_cell_error(row.get(k), _is_model(row)) is None for k in ours))


def _kernels(row: dict[str, Any]) -> str:
    parts = [(row.get(k) or {}).get("kernels") for k in ("eager", "inductor", "kernelscope")]
    return "/".join("—" if n is None else str(n) for n in parts)


def _compile(row: dict[str, Any], key: str = "compile_s") -> str:
    parts = [(row.get(k) or {}).get(key) for k in ("inductor", "kernelscope")]
    return "/".join("—" if s is None else f"{s:.1f}" for s in parts)


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def suite_table(rows: list[dict[str, Any]], peak_gbps: float | None) -> str:
    max_col = any("inductor_max" in r for r in rows)
    head = ("| case | shapes | eager ms | Inductor ms | "
            + ("max-autotune ms | " if max_col else "")
            + "Kernelscope ms | KS / Inductor | KS / eager | % of copy | kernels e/ind/ks "
            "| cold compile s ind/ks | check |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    ratios: list[float] = []
    for row in rows:
        eager, ind, ks = (_ms(row.get(k)) for k in ("eager", "inductor", "kernelscope"))
        pct = "—"
        if ks and row.get("bytes") and peak_gbps and row.get("memory_bound"):
            pct = f"{100 * row['bytes'] / (ks * 1e-3) / 1e9 / peak_gbps:.0f}%"
        if ks and ind and is_ok(row):
            ratios.append(ks / ind)
        cells = [row["case"], row.get("shapes", ""), fmt_ms(eager), fmt_ms(ind)]
        if max_col:
            cells.append(fmt_ms(_ms(row.get("inductor_max"))))
        cells += [fmt_ms(ks), _ratio(ks, ind), _ratio(ks, eager), pct, _kernels(row),
                  _compile(row), check_text(row)]
        lines.append("| " + " | ".join(cells) + " |")
    g = geomean(ratios)
    lines.append("")
    lines.append(f"Geometric mean KS / Inductor over the {len(ratios)} cases that compile "
                 f"and match: {g:.2f}" if g else "No case both compiled and matched.")
    return "\n".join(lines)


def model_table(rows: list[dict[str, Any]]) -> str:
    head = ("| model | input | eager ms | Inductor ms | Kernelscope ms | KS speedup over eager "
            "| Inductor speedup | kernels e/ind/ks | cold compile s ind/ks "
            "| warm compile s ind/ks | check |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    ks_up, ind_up = [], []
    for row in rows:
        eager, ind, ks = (_ms(row.get(k)) for k in ("eager", "inductor", "kernelscope"))
        if eager and ks and is_ok(row):
            ks_up.append(eager / ks)
        if eager and ind:
            ind_up.append(eager / ind)
        lines.append("| " + " | ".join([
            row.get("what", row["case"]), row.get("shapes", ""), fmt_ms(eager), fmt_ms(ind),
            fmt_ms(ks), _ratio(eager, ks), _ratio(eager, ind), _kernels(row), _compile(row),
            _compile(row, "warm_compile_s"), check_text(row)]) + " |")
    gk, gi = geomean(ks_up), geomean(ind_up)
    if gk and gi:
        lines += ["", f"Geometric mean speedup over eager: Kernelscope {gk:.2f}x "
                  f"({len(ks_up)} models), Inductor {gi:.2f}x ({len(ind_up)} models)."]
    return "\n".join(lines)


def _graphs_text(cell: dict[str, Any] | None) -> str:
    g = (cell or {}).get("cuda_graphs")
    if not g:
        return "—"
    text = f"{g['recorded']} of {g['graphs']} recorded, {g['replays']} replays"
    return text + (f" (not: {'; '.join(g['why_not'])})".replace("|", "\\|")
                   if g.get("why_not") else "")


def train_table(rows: list[dict[str, Any]]) -> str:
    graphs = any("inductor_ro" in r or "kernelscope_cg" in r for r in rows)
    b = any("kernelscope_b" in r for r in rows)  # --ks-options-b
    head = ("| model | input | eager ms (spread) | Inductor ms | Kernelscope ms | KS / Inductor "
            "| KS speedup over eager | "
            + ("KS (options B) ms | KS B / Inductor | " if b else "")
            + ("Inductor reduce-overhead ms | KS CUDA graphs ms | KS graphs / Inductor "
               "reduce-overhead | KS CUDA graphs | " if graphs else "")
            + "cold compile s ind/ks | gradients vs eager |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    ratios, graph_ratios = [], []
    for row in rows:
        eager, ind, ks, ro, cg = (_ms(row.get(k)) for k in (
            "eager", "inductor", "kernelscope", "inductor_ro", "kernelscope_cg"))
        if ind and ks and is_ok(row):
            ratios.append(ks / ind)
        if ro and cg and is_ok(row):
            graph_ratios.append(cg / ro)
        cells = [row.get("what", row["case"]), row.get("shapes", ""), _spread(row.get("eager")),
                 _spread(row.get("inductor")), _spread(row.get("kernelscope")), _ratio(ks, ind),
                 _ratio(eager, ks)]
        if b:
            kb = _ms(row.get("kernelscope_b"))
            cells += [_spread(row.get("kernelscope_b")), _ratio(kb, ind)]
        if graphs:
            cells += [_spread(row.get("inductor_ro")), _spread(row.get("kernelscope_cg")),
                      _ratio(cg, ro),
                      _graphs_text(row.get("kernelscope_cg"))]
        lines.append("| " + " | ".join(cells + [_compile(row), check_text(row)]) + " |")
    g = geomean(ratios)
    if g:
        lines += ["", f"Geometric mean Kernelscope / Inductor: {g:.2f} ({len(ratios)} models; "
                  f"target <= {TRAIN_TARGET[0]:.2f}, none above {TRAIN_TARGET[1]:.2f})."]
    gg = geomean(graph_ratios)
    if gg:
        lines += ["", f"Geometric mean with CUDA graphs on both sides (Kernelscope cuda_graphs"
                  f" / Inductor reduce-overhead): {gg:.2f} ({len(graph_ratios)} models)."]
    return "\n".join(lines)


def _spread(cell: dict[str, Any] | None) -> str:
    ms, lo_hi = _ms(cell), (cell or {}).get("spread")
    if ms is None:
        return "—"
    return fmt_ms(ms) + (f" ({fmt_ms(lo_hi[0])}–{fmt_ms(lo_hi[1])})" if lo_hi else "")


def _err(cell: dict[str, Any] | None) -> str:
    err = ((cell or {}).get("check") or {}).get("err")
    return "—" if err is None else f"{err:.2f}"


def _eagerly(cell: dict[str, Any] | None) -> str:
    """Kernelscope's graphs that ran op by op (a compile it refused), said beside the check."""
    eager = (cell or {}).get("ran_eagerly") or []
    if not eager:
        return ""
    why = eager[0].split("eagerly: ", 1)[-1][:120].replace("|", "\\|")
    return f"; **{len(eager)} Kernelscope graph(s) ran eagerly**: {why}"


def infer_table(rows: list[dict[str, Any]]) -> str:
    head = ("| model | family | input | eager ms (spread) | Inductor ms | Kernelscope ms "
            "| KS / eager | KS / Inductor | error / bound, ks/ind | compile s ind/ks | check |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        eager, ind, ks = (row.get(k) for k in ("eager", "inductor", "kernelscope"))
        lines.append("| " + " | ".join([
            row["case"], row.get("what", ""), row.get("shapes", ""), _spread(eager),
            _spread(ind), _spread(ks), _ratio(_ms(ks), _ms(eager)), _ratio(_ms(ks), _ms(ind)),
            f"{_err(ks)}/{_err(ind)}", _compile(row), check_text(row) + _eagerly(ks)]) + " |")
    timed = [r for r in rows if is_ok(r) and _ms(r.get("kernelscope")) and _ms(r.get("eager"))]
    slower = [r["case"] for r in timed if _ms(r["kernelscope"]) > _ms(r["eager"])]  # type: ignore[operator]
    ran = [r for r in rows if "skipped" not in r]
    lines += ["", f"{sum(map(is_ok, ran))} of {len(ran)} run within the 3x rule against eager "
              f"float32 (error / bound <= 1.00); slower than eager: {', '.join(slower) or 'none'}."]
    return "\n".join(lines)


def overhead_table(rows: list[dict[str, Any]]) -> str:
    labels = ["eager", "inductor", "inductor_graphs", "kernelscope", "kernelscope_jit",
              "kernelscope_graphs"]
    head = "| probe | " + " | ".join(labels) + " |"
    lines = [head, "|" + "---|" * (len(labels) + 1)]
    for row in rows:
        if "skipped" in row or "failed" in row:
            lines.append(f"| {row['case']} | {row.get('skipped') or row.get('failed')} |"
                         + " |" * (len(labels) - 1))
            continue
        cells = []
        for label in labels:
            cell = row.get(label)
            if cell is None:
                cells.append("—")
            elif "error" in cell:
                cells.append("error: " + cell["error"][:80].replace("|", "\\|"))
            else:
                text = f"{cell['us']:.1f} us/call"
                if cell.get("ms") is not None:
                    text += f", {fmt_ms(cell['ms'])} ms"
                if not (cell.get("check") or {}).get("ok", True):
                    text += " (**mismatch**)"
                cells.append(text)
        lines.append(f"| {row['case']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def section(rows: list[dict[str, Any]], env: dict[str, Any], peak: float | None,
            settings: dict[str, Any], command: str, title: str = "") -> str:
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    where = env.get("gpu") or f"CPU ({env.get('cpu')}, {env.get('threads')} threads)"
    timing = ("triton.testing.do_bench median" if settings["device"].startswith("cuda")
              else "torch.utils.benchmark median") + \
        f", warmup {settings['warmup']} ms, rep {settings['rep']} ms"
    out = [f"## {when} · {where}{' (' + title + ')' if title else ''}", "",
           f"- command: `{command}`",
           f"- device: {where}; driver {env.get('driver') or '—'}, CUDA {env.get('cuda') or '—'}"
           + (f"; measured copy bandwidth: {peak:.0f} GB/s" if peak else ""),
           f"- torch {env['torch']}, triton {env.get('triton') or '—'}, Python {env['python']}, "
           f"kernelscope commit {env['commit']}; sizes: {settings['size']}",
           f"- timing: {timing}; ratios are Kernelscope's time over the other's (below 1.00 "
           "Kernelscope is faster)", ""]
    groups = {k: [r for r in rows if r.get("item", "case:").startswith(k)]
              for k in ("case:", "model:", "train:", "overhead:", "stages:", "infer:")}
    if groups["case:"]:
        out += ["### Suite", "", suite_table(groups["case:"], peak), ""]
    if groups["model:"]:
        out += ["### Models", "", model_table(groups["model:"]), ""]
    if groups["train:"]:
        out += ["### Training steps (forward + backward, bf16 autocast, eval mode)", "",
                train_table(groups["train:"]), ""]
    if groups["infer:"]:
        out += ["### Inference in bfloat16 (the model zoo and timm), against eager float32", "",
                "Times are the median of interleaved rounds, with the fastest and slowest "
                "round; error / bound is the 3x rule's (<= 1.00 passes).", "",
                infer_table(groups["infer:"]), ""]
    if groups["overhead:"]:
        out += ["### Per-call overhead and CUDA graphs", "", overhead_table(groups["overhead:"]),
                ""]
    if groups["stages:"]:
        out += ["### The compiler's own stages (lowering to codegen), per sample", "",
                "Cold: the first compile in a fresh process; warm: the median of three more "
                "on the same capture. Wall-clock ms from the stage events; `load` is the "
                "1-minute load average.", "", stages_table(groups["stages:"]), ""]
    return "\n".join(out)
