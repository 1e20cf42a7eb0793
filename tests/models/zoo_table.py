"""The model zoo's table (docs/coverage.md): every architecture's training step, ours and
(with --inductor) Inductor's on the same harness, with the ops that went to ATen.

    python tests/models/zoo_table.py --inductor --write   # docs/coverage/zoo.{md,json}
    python tests/models/zoo_table.py --baseline           # rewrite zoo_fallbacks.json

--write puts the section into docs/coverage/ and rewrites docs/coverage.md, which ends
with it (tests/opinfo/coverage_report.py).

--baseline records each model's fallback count as the upper bound test_zoo.py asserts
(for the compiler of another commit: PYTHONPATH=<its checkout>; the file says which
commit). Models run one after another in this process; a model that raises is a row
that says so.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
DOCS = HERE.parents[1] / "docs" / "coverage"
if not os.environ.get("PYTHONPATH"):  # this checkout's compiler, not an installed one
    sys.path.insert(0, str(HERE.parents[1]))
ZOO_SECTION = "zoo.md"  # tests/opinfo/coverage_report.py appends it to docs/coverage.md
sys.path.insert(0, str(HERE))
from zoo import BASELINE, row  # noqa: E402
from zoo_models import MODELS  # noqa: E402


def versions() -> dict[str, str]:
    import transformers
    import triton

    import kernelscope.compiler

    # The compiler's own checkout (PYTHONPATH may point at another commit's than this one)
    where = Path(kernelscope.compiler.__file__).resolve().parent
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=where).stdout.strip()
    return {"date": datetime.date.today().isoformat(), "commit": commit,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "triton": triton.__version__, "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(),
            "threads": str(torch.get_num_threads())}


def safe_row(name: str, inductor: bool) -> dict[str, Any]:
    try:
        return row(name, inductor)
    except Exception as e:  # noqa: BLE001 - a row that says what happened
        return {"model": name, "family": MODELS[name][0], "ok": False, "worst": None,
                "failed": [f"raised {type(e).__name__}: {str(e).splitlines()[0][:120]}"],
                "fallbacks": None, "by_op": {}, "reasons": {}, "seconds": None}


def _verdict(ok: Any, worst: Any, failed: list[str]) -> str:
    if worst is None:
        return "error: " + "; ".join(failed)
    return f"{'yes' if ok else 'NO'} ({worst:.2f})" + ("" if ok else f" {failed[:3]}")


INTRO = """# Model zoo

One training step (loss, `loss.backward()`, one AdamW step) of each Hugging Face
architecture in tests/models/zoo_models.py, built from a tiny config (random init, every
dropout off), on the CPU in float32: compiled with Kernelscope (C++), and with Inductor
on the same harness. Each is judged against the same step in float64 eager by the
training suite's rule (docs/correctness.md, "Training real models"): every compared
tensor (loss, gradients, parameters after the step) within 3 x eager float32's error plus
1e-5 x its rms. The MoE models' float64 step runs transformers' loop over the experts
(their float32 step calls grouped_mm, which has no float64). *worst* is the largest
error / bound over the step's tensors (1.0 is the bound). *on ATen* counts the ops of
the compiled graphs that went to ATen, from the lowering events (tests/fallback_events.py),
with their reasons; CI (tests/models/test_zoo.py) asserts each model's count at most
tests/models/zoo_fallbacks.json's."""


def markdown(rows: list[dict[str, Any]], inductor: bool, info: dict[str, str],
             command: str) -> str:
    head = "| model | family | reference | ours within rule (worst) | ours on ATen | why |"
    sep = "|---|---|---|---|---|---|"
    if inductor:
        head += " Inductor within rule (worst) |"
        sep += "---|"
    lines = [INTRO, "", f"`{command}`", "", ", ".join(f"{k} {v}" for k, v in info.items()),
             "", head, sep]
    for r in rows:
        why = "; ".join(f"{op.split('.', 1)[-1]} x{n}: {r['reasons'].get(op, '')[:60]}"
                        for op, n in r["by_op"].items())
        line = (f"| {r['model']} | {r['family']} | {r.get('reference', '')} | "
                f"{_verdict(r['ok'], r['worst'], r['failed'])} | {r['fallbacks']} | {why} |")
        if inductor:
            theirs = _verdict(r.get("inductor_ok"), r.get("inductor_worst"),
                              r.get("inductor_failed", []))
            line += f" {theirs} |"
        lines.append(line)
    ok = sum(1 for r in rows if r["ok"])
    lines += ["", f"ours: {ok} of {len(rows)} within the rule; worst = largest "
              "error / bound over the step's tensors (1.0 is the bound)"]
    if inductor:
        iok = sum(1 for r in rows if r.get("inductor_ok"))
        lines.append(f"Inductor: {iok} of {len(rows)} within the rule")
    wall = sum(r["seconds"] or 0 for r in rows)
    cpu = sum(r.get("cpu_seconds") or 0 for r in rows)
    lines.append(f"{wall:.0f} s wall, {cpu:.0f} s CPU for the whole table in one process")
    return "\n".join(lines)


def write_baseline(rows: list[dict[str, Any]], info: dict[str, str]) -> None:
    models = {r["model"]: {"fallbacks": r["fallbacks"], "by_op": r["by_op"]} for r in rows}
    missing = [m for m, e in models.items() if e["fallbacks"] is None]
    if missing:
        raise SystemExit(f"no fallback count for {missing}: no baseline written")
    doc = {"about": "Ops each zoo model's training step sends to ATen (tests/models/"
                    "test_zoo.py asserts them as upper bounds)", "made_at": info,
           "models": models}
    BASELINE.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inductor", action="store_true", help="Inductor's step beside ours")
    ap.add_argument("--baseline", action="store_true", help="rewrite zoo_fallbacks.json")
    ap.add_argument("--write", action="store_true",
                    help="docs/coverage/zoo.md and zoo.json, then docs/coverage.md")
    ap.add_argument("models", nargs="*", help="these models only (default: all)")
    args = ap.parse_args()
    info = versions()
    rows = []
    for name in args.models or list(MODELS):
        rows.append(safe_row(name, args.inductor))
        print(json.dumps({k: rows[-1].get(k) for k in ("model", "ok", "worst", "fallbacks",
                                                        "inductor_ok", "seconds")}),
              file=sys.stderr, flush=True)
    if args.baseline:
        write_baseline(rows, info)
    command = "python tests/models/zoo_table.py " + " ".join(sys.argv[1:])
    text = markdown(rows, args.inductor, info, command.strip())
    if args.write:
        (DOCS / "zoo.json").write_text(json.dumps({"info": info, "rows": rows}, indent=1)
                                       + "\n")
        (DOCS / ZOO_SECTION).write_text(text + "\n")
        sys.path.insert(0, str(HERE.parent / "opinfo"))
        from coverage_report import write_report

        write_report(DOCS, DOCS.parent / "coverage.md")
    print(text)


if __name__ == "__main__":
    main()
