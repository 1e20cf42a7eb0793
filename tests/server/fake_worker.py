"""A stand-in for the compiler CLI's two halves: same flags, same NDJSON shape, fast.

- `fake_worker.py FILE --json ... --front-only --bundle B` (the front half): emits
  `source`, runs the snippet with exec() (so hostile snippets behave as they would in the
  real compiler's `source`/`capture` stages), and writes a JSON "bundle" holding source and
  capture, or the error;
- `fake_worker.py stages B --json ... [--no-replay-source]` (the back half): never runs
  the snippet; replays the bundle's events (its source only without the flag) and emits
  the remaining stages with tiny payloads and `done`;
- without `--front-only`, both in one process (the server's BACK_CMD=None mode).

`# fake-trace: NAME` makes the job's events those of tests/browser/fixtures/NAME.json.gz
(its `capture_graph`s from the front half, every later stage from the back half): a
model-sized trace through the real job path.

Used where 20 real compiles on 2 cores would take minutes. `# fake-sleep: 0.3` in a
snippet makes every stage take that long; with `--inductor` an `inductor` event follows
`profile` (`# fake-inductor: ...` in the snippet: see fake_inductor); `# fake-import: wait`
holds the front half before its first event until a test lets it go.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
import traceback
from typing import Any

STAGES = ("lowering", "scheduling", "memory", "codegen", "compile", "run", "profile")
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "browser", "fixtures")


def fixture_stages(code: str) -> dict[str, Any] | None:
    """`# fake-trace: NAME`: the fixture's payloads by stage (its capture_graphs as a list)."""
    match = re.search(r"#\s*fake-trace:\s*(\w+)", code)
    if not match:
        return None
    with gzip.open(os.path.join(FIXTURES, f"{match.group(1)}.json.gz")) as f:
        events = json.load(f)["events"]
    stages: dict[str, Any] = {e["stage"]: e["data"] for e in events}
    stages["capture_graph"] = [e["data"] for e in events if e["stage"] == "capture_graph"]
    return stages


def emit(seq: int, stage: str, data: dict, ms: float = 0.0) -> int:
    print(json.dumps({"schema": 1, "seq": seq, "stage": stage, "ms": ms, "data": data}), flush=True)
    return seq + 1


def options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="auto")
    p.add_argument("--no-fusion", action="store_true")
    p.add_argument("--inductor", action="store_true")
    p.add_argument("--options")  # further CompileOptions as JSON (server/web/options.py)


def front(args: argparse.Namespace) -> dict[str, Any]:
    """Run the snippet; the bundle's content: source and capture, or an error."""
    with open(args.file, encoding="utf-8") as f:
        code = f.read()
    if re.search(r"#\s*fake-import:\s*wait", code):
        # As a cold worker importing torch: nothing until `import-gate` is in the scratch
        # directory (a test puts it there from outside).
        while not os.path.exists("import-gate"):
            time.sleep(0.02)
    source = {
        "code": code,
        "filename": "snippet.py",
        "entry": args.entry,
        "device": args.device,
        # what the compiler reports for a CPU graph: "auto" resolves to C++ there
        "backend": "cpp" if args.backend == "auto" else args.backend,
        "options": {"fusion": not args.no_fusion, "inductor": args.inductor},
        "origin": "snippet",  # as the real front half labels it (a snippet can unlabel it)
    }
    emit(0, "source", source)
    try:
        exec(compile(code, "snippet.py", "exec"), {"__name__": "__snippet__"})  # noqa: S102
    except SyntaxError as exc:
        error = {"stage": "source", "kind": "syntax", "message": str(exc), "line": exc.lineno}
        return {"source": source, "error": error}
    except BaseException as exc:  # noqa: BLE001 - the snippet may raise anything
        error = {
            "stage": "capture",
            "kind": "exception",
            "message": f"{type(exc).__name__}: {exc}",
            "line": None,
            "traceback": traceback.format_exc(),
        }
        return {"source": source, "error": error}
    fixture = fixture_stages(code)
    if fixture is not None:
        for seq, graph in enumerate(fixture["capture_graph"], 1):
            emit(seq, "capture_graph", graph)
        return {"source": source, "capture": fixture["capture"]}
    return {"source": source, "capture": {"graphs": []}}


def back(bundle: dict[str, Any], replay: bool, isolated: bool, seq: int = 0,
         replay_source: bool = True, inductor: bool = False) -> None:
    """Everything after capture, from the bundle alone."""
    match = re.search(r"#\s*fake-sleep:\s*([0-9.]+)",
                      str(bundle.get("source", {}).get("code", "")))
    pause = float(match.group(1)) if match else 0.0
    # As the real back half (compiler/pipeline.py run_back): the bundle's payloads are
    # replayed as they are, whatever they say; the server decides whose they are.
    if replay and replay_source and "source" in bundle:
        seq = emit(seq, "source", bundle["source"])
    if "error" in bundle:
        seq = emit(seq, "error", bundle["error"])
        emit(seq, "done", {"ok": False, "isolated": isolated})
        return
    if replay:
        seq = emit(seq, "capture", bundle["capture"])
    fixture = fixture_stages(str(bundle.get("source", {}).get("code", "")))
    for stage in STAGES:
        time.sleep(pause)
        data = {"graphs": []} if stage != "run" else {"ok": True}
        seq = emit(seq, stage, fixture[stage] if fixture else data, pause * 1000)
    if inductor:
        seq = fake_inductor(seq, str(bundle.get("source", {}).get("code", "")))
    emit(seq, "done", {"ok": True, "isolated": isolated})


INDUCTOR = {"measured": True, "code": ["# inductor's output code"], "device": "cpu",
            "kernels": [{"name": "cpp_fused_add_relu_0", "language": "cpp", "source": "...",
                         "ms": 0.0123}], "reason": None, "error": None, "inductor_ms": 0.0456}


def fake_inductor(seq: int, code: str) -> int:
    """The `inductor` follow-up, as the snippet's `# fake-inductor: WHAT` says: `wait`
    (until a file `inductor-gate` appears in its scratch directory, the working directory:
    a test puts it there from outside), `crash` (SIGSEGV), `hang`, `error` (the compiler's
    own error event, then done), `silent` (done without it); otherwise at once."""
    match = re.search(r"#\s*fake-inductor:\s*(\w+)", code)
    what = match.group(1) if match else ""
    if what == "wait":
        while not os.path.exists("inductor-gate"):
            time.sleep(0.02)
    elif what == "crash":
        os.kill(os.getpid(), 11)
    elif what == "hang":
        time.sleep(600)
    elif what == "error":
        return emit(seq, "error", {"stage": "inductor", "kind": "exception",
                                   "message": "RuntimeError: inductor broke", "line": None})
    elif what == "silent":
        return seq
    return emit(seq, "inductor", INDUCTOR, 12.5)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    if argv[:1] == ["stages"]:
        p.add_argument("bundle")
        options(p)
        p.add_argument("--no-replay-source", action="store_true")
        p.add_argument("--code")  # the submitted snippet (the real back half quotes it)
        args = p.parse_args(argv[1:])
        with open(args.bundle, encoding="utf-8") as f:
            back(json.load(f), replay=True, isolated=True,
                 replay_source=not args.no_replay_source, inductor=args.inductor)
        return 0
    p.add_argument("file")
    options(p)
    p.add_argument("--entry")
    p.add_argument("--bundle")
    p.add_argument("--front-only", action="store_true")
    args = p.parse_args(argv)
    bundle = front(args)
    if args.front_only:
        with open(args.bundle + ".tmp", "w", encoding="utf-8") as f:
            json.dump(bundle, f)
        os.replace(args.bundle + ".tmp", args.bundle)
        if "error" in bundle:
            emit(1, "error", bundle["error"])
            emit(2, "done", {"ok": False})
        return 0
    if "error" in bundle:
        emit(1, "error", bundle["error"])
        emit(2, "done", {"ok": False, "isolated": False})
        return 0
    emit(1, "capture", bundle["capture"])
    back(bundle, replay=False, isolated=False, seq=2, inductor=args.inductor)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
