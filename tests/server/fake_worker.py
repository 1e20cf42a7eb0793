"""A stand-in for `python -m compiler compile FILE --json`: same flags, same NDJSON shape.

It emits `source`, runs the snippet with exec() (so hostile snippets behave as they would in
the real compiler's `source`/`capture` stages), then emits the remaining stages with tiny
payloads and `done`. Used for the concurrency test, where 20 real compiles on 2 cores would
take minutes. `# fake-sleep: 0.3` in a snippet makes every stage take that long.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import traceback

STAGES = ("capture", "lowering", "scheduling", "memory", "codegen", "compile", "run", "profile")


def emit(seq: int, stage: str, data: dict, ms: float = 0.0) -> int:
    print(json.dumps({"schema": 1, "seq": seq, "stage": stage, "ms": ms, "data": data}), flush=True)
    return seq + 1


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="auto")
    p.add_argument("--no-fusion", action="store_true")
    p.add_argument("--inductor", action="store_true")
    p.add_argument("--options")  # further CompileOptions as JSON (server/options.py)
    p.add_argument("--entry")
    p.add_argument("--inputs")
    args = p.parse_args(argv)
    with open(args.file, encoding="utf-8") as f:
        code = f.read()
    match = re.search(r"#\s*fake-sleep:\s*([0-9.]+)", code)
    pause = float(match.group(1)) if match else 0.0
    options = {"fusion": not args.no_fusion, "inductor": args.inductor}
    seq = emit(
        0,
        "source",
        {
            "code": code,
            "filename": "snippet.py",
            "entry": args.entry,
            "device": args.device,
            # what the compiler reports for a CPU graph: "auto" resolves to C++ there
            "backend": "cpp" if args.backend == "auto" else args.backend,
            "options": options,
        },
    )
    try:
        exec(compile(code, "snippet.py", "exec"), {"__name__": "__snippet__"})  # noqa: S102
    except SyntaxError as exc:
        seq = emit(
            seq,
            "error",
            {"stage": "source", "kind": "syntax", "message": str(exc), "line": exc.lineno},
        )
        emit(seq, "done", {"ok": False})
        return 0
    except BaseException as exc:  # noqa: BLE001 - the snippet may raise anything
        seq = emit(
            seq,
            "error",
            {
                "stage": "capture",
                "kind": "exception",
                "message": f"{type(exc).__name__}: {exc}",
                "line": None,
                "traceback": traceback.format_exc(),
            },
        )
        emit(seq, "done", {"ok": False})
        return 0
    for stage in STAGES:
        time.sleep(pause)
        seq = emit(seq, stage, {"graphs": []} if stage != "run" else {"ok": True}, pause * 1000)
    emit(seq, "done", {"ok": True})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
