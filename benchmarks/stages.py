"""Compile-time probe: the compiler's own stages (lowering .. codegen) on every sample.

`python -m benchmarks --only stages` runs one item per sample in samples/, each in a
process of its own (so the first compile is a cold one, as in a fresh explorer worker:
every in-process cache empty, modules imported). The item captures the sample once (the
front half, not timed), then runs the back half up to and including `codegen` four
times on the same capture bundle: the first run is "cold", the median of the other
three "warm" (in-process caches filled). Times are the stages' own `ms`, from the events
the UI shows (wall clock, so a loaded machine inflates them: the item records the load
average when it ran). g++, Triton and the run are not part of it.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.snippet import sample_paths

STAGES = ("lowering", "scheduling", "memory", "codegen")
WARM_RUNS = 3


def sample_names() -> list[str]:
    return [p.stem for p in sample_paths()]


def _back_to_codegen(bundle_path: Path, options: Any) -> dict[str, float]:
    """One run of the back half's stages up to codegen, as `run_back` runs them (each
    stage over every graph): wall ms and CPU ms (`process_time`) per stage."""
    import torch

    from kernelscope.compiler.capture.bundle import read_bundle
    from kernelscope.compiler.compile_fx import (
        codegen_stage,
        lower,
        memory_stage,
        schedule_stage,
    )
    from kernelscope.compiler.graph_work import GraphWork

    bundle = read_bundle(bundle_path)
    with torch.no_grad():
        graphs = bundle.rebuild(options.device)
    code = str(bundle.events.get("source", {}).get("data", {}).get("code", ""))
    works = [GraphWork(g.id, gm, inputs, options, bundle.snippet_path, code.splitlines())
             for g, gm, inputs in graphs]
    out: dict[str, float] = {}
    for stage, fn in zip(STAGES, (lower, schedule_stage, memory_stage, codegen_stage)):
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.no_grad():
            for w in works:
                fn(w)
        out[stage] = (time.perf_counter() - t0) * 1000
        out[f"{stage}_cpu"] = (time.process_time() - c0) * 1000
    out["total"] = sum(out[s] for s in STAGES)
    out["total_cpu"] = sum(out[f"{s}_cpu"] for s in STAGES)
    return out


def measure_stages(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    from kernelscope.compiler.events.read import parse_event, payload
    from kernelscope.compiler.events.types import Error
    from kernelscope.compiler.options import CompileOptions
    from kernelscope.compiler.pipeline import run_front

    row: dict[str, Any] = {"item": f"stages:{name}", "case": name}
    path = next(p for p in sample_paths() if p.stem == name)
    options = CompileOptions(device="cuda" if settings["device"].startswith("cuda") else "cpu")
    with tempfile.TemporaryDirectory(prefix="ksbench-stages-") as tmp:
        bundle = Path(tmp) / "capture.ksb"
        for ev in run_front(path.read_text(), options, bundle, str(path)):
            if ev.stage == "error":
                error = payload(parse_event(ev.to_json()), Error)
                row["failed"] = f"capture: {error.message}"[:300]
                return row
        row["load"] = round(os.getloadavg()[0], 1)
        try:
            runs = [_back_to_codegen(bundle, options) for _ in range(1 + WARM_RUNS)]
        except Exception as e:  # noqa: BLE001 - a failing sample is a row, not a crash
            row["failed"] = f"{type(e).__name__}: {e}"[:300]
            return row
    row["cold"] = {k: round(v, 1) for k, v in runs[0].items()}
    row["warm"] = {k: round(statistics.median(r[k] for r in runs[1:]), 1) for k in runs[0]}
    return row


def stages_table(rows: list[dict[str, Any]]) -> str:
    head = ("| sample | " + " | ".join(f"{s} ms" for s in STAGES) +
            " | total cold ms (CPU ms) | total warm ms (CPU ms) | load |")
    lines = [head, "|" + "---|" * (len(STAGES) + 4)]
    for row in rows:
        if "failed" in row:
            lines.append(f"| {row['case']} | {row['failed']} |" + " |" * (len(STAGES) + 2))
            continue
        cold, warm = row["cold"], row["warm"]
        cells = [f"{cold[s]:.1f}" for s in STAGES]
        lines.append(f"| {row['case']} | " + " | ".join(cells) +
                     f" | **{cold['total']:.1f}** ({cold['total_cpu']:.1f}) | "
                     f"{warm['total']:.1f} ({warm['total_cpu']:.1f}) | {row['load']} |")
    return "\n".join(lines)
