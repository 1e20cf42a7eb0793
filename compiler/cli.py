"""The compiler's commands of `kernelscope`: compile a snippet and print every stage, run the
back half on a bundle, or run your own script with its compiles recorded. The explorer's
commands (`serve`, `worker`, `open`) live in server/cli.py; kernelscope/cli.py sends each
command where it belongs.

    kernelscope compile FILE.py [--device cpu|cuda] [--backend cpp|triton]
                                [--stage NAME] [--json] [--no-fusion] [--inductor]
                                [--bundle B [--front-only]]
    kernelscope stages B [--device cpu|cuda] [--backend cpp|triton] [--json] [--no-replay] ...
    kernelscope run [--trace-dir DIR] [--all-backends | --inductor] [--nproc N]
                    SCRIPT.py|-m MODULE [ARGS ...]

`compile` runs both halves of the pipeline in this process. With `--front-only --bundle B`
it runs only the front half (the snippet, `source` and `capture`) and writes the capture
bundle B; `stages B` runs the back half (`lowering` .. `profile`) on it without running
any of the snippet's code (docs/architecture.md, "Trust boundary").

`run` runs your own script with its torch.compile calls recorded into a trace directory
(compiler/trace/own_run.py); `run --inductor` runs it unchanged (stock Inductor) with
TORCH_TRACE and provenance on, and opens the log (compiler/trace/torch_trace_run.py);
`kernelscope open` (server/open_cmd.py) stores such a directory as a trace with a
permalink. docs/own-run.md says how.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen import targets  # torch-free: asked before torch is imported
from kernelscope.compiler.devices import CPU, CUDA, DEVICES
from kernelscope.compiler.events.stage import FOLLOW_UPS, PARTS, STAGES, TERMINAL  # torch-free


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelscope", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile a snippet and show every stage")
    c.add_argument("file")
    _common(c)
    c.add_argument("--entry", default=None, help="function or module to compile")
    c.add_argument("--bundle", default=None, help="write the capture bundle to this file")
    c.add_argument("--front-only", action="store_true",
                   help="run only source and capture (needs --bundle)")
    b = sub.add_parser("stages", help="run the stages after capture on a capture bundle")
    b.add_argument("bundle")
    _common(b)
    b.add_argument("--no-replay", action="store_true",
                   help="do not repeat the bundle's source and capture events")
    b.add_argument("--no-replay-source", action="store_true",
                   help="repeat the bundle's capture event only (its source was streamed)")
    b.add_argument("--code", default=None, metavar="FILE",
                   help="the snippet as submitted: the source kernel comments quote "
                        "(never the bundle's copy)")
    r = sub.add_parser("run", help="run your script, recording every torch.compile")
    r.add_argument("--trace-dir", default=None,
                   help="where to record (default: ks-trace/<script>-<time>)")
    r.add_argument("--all-backends", action="store_true",
                   help="compile every torch.compile call with Kernelscope, whatever its "
                        "backend (default: only backend=\"kernelscope\" is recorded)")
    r.add_argument("--inductor", action="store_true",
                   help="run the script as it is (stock Inductor) with TORCH_TRACE and "
                        "Inductor's provenance on, then open the log in the explorer")
    r.add_argument("-m", dest="module", action="store_true",
                   help="SCRIPT is a module name, run as python -m would")
    r.add_argument("--nproc", type=int, default=1, metavar="N",
                   help="run N processes of the script as torchrun does on one host "
                        "(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set), one trace per rank")
    r.add_argument("script")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    return p


def _common(c: argparse.ArgumentParser) -> None:
    c.add_argument("--device", choices=list(DEVICES), default=None,
                   help="where tensors live (default: cuda if available, else cpu)")
    c.add_argument("--backend", choices=targets.choices(), default=targets.AUTO)
    c.add_argument("--stage", default=None, choices=[*STAGES, *PARTS, *FOLLOW_UPS, *TERMINAL],
                   metavar="NAME", help="print only this stage: one of %(choices)s")
    c.add_argument("--json", action="store_true", help="one JSON event per line")
    c.add_argument("--no-fusion", action="store_true")
    c.add_argument("--no-reuse", action="store_true", help="no buffer reuse")
    c.add_argument("--no-profile", action="store_true")
    c.add_argument("--inductor", action="store_true", help="also time TorchInductor")
    c.add_argument("--options", default=None, metavar="JSON",
                   help='more CompileOptions fields, e.g. \'{"persistent_rblock": 1024}\'')


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    if args.command == "stages":
        return _stages(args)
    if args.command == "run":
        return _run(args)
    return _compile(args)


def traced_run(argv: list[str]) -> tuple[list[str], Path | None]:
    """For `run --inductor`: the arguments with the trace directory named (chosen here
    once), and that directory, which `kernelscope open` then reads; else (argv, None)."""
    if not argv or argv[0] != "run":
        return argv, None
    try:
        args = _parser().parse_args(argv)
    except SystemExit:
        return argv, None
    if not args.inductor:
        return argv, None
    from kernelscope.compiler.trace import own_run

    if args.trace_dir:
        return argv, Path(args.trace_dir)
    trace_dir = own_run.default_dir(args.script)
    return ["run", "--trace-dir", str(trace_dir), *argv[1:]], trace_dir


def _run(args: argparse.Namespace) -> int:
    from kernelscope.compiler.trace import own_run

    if not args.module and not Path(args.script).is_file():
        print(f"kernelscope run: no such script: {args.script}", file=sys.stderr)
        return 2
    trace_dir = Path(args.trace_dir) if args.trace_dir else own_run.default_dir(args.script)
    if args.inductor:
        from kernelscope.compiler.trace.torch_trace_run import run_traced

        return run_traced(args.script, args.args, trace_dir, module=args.module)
    if args.nproc > 1:
        from kernelscope.compiler.trace.launch import run_ranks

        return run_ranks(args.nproc, args.script, args.args, trace_dir, module=args.module,
                         all_backends=args.all_backends)
    return own_run.run(args.script, args.args, trace_dir, module=args.module,
                       all_backends=args.all_backends)


def _syntax_error(code: str, filename: str, as_json: bool) -> int | None:
    """Report a syntax error before importing torch (which takes seconds)."""
    import ast

    from kernelscope.compiler.events.stage import StageEvent

    try:
        ast.parse(code, filename)
    except SyntaxError as e:
        events = [StageEvent(0, "error", 0.0, {"stage": "source", "kind": "syntax",
                                              "message": f"SyntaxError: {e.msg}",
                                              "line": e.lineno, "traceback": None}),
                  StageEvent(1, "done", 0.0, {"ok": False})]
        for ev in events:
            if as_json:
                print(ev.to_json(), flush=True)
            else:
                print(_text(ev), flush=True)
        return 0 if as_json else 1
    return None


def _compile(args: argparse.Namespace) -> int:
    if args.front_only and not args.bundle:
        print("kernelscope: --front-only needs --bundle FILE", file=sys.stderr)
        return 2
    try:
        code = Path(args.file).read_text()
    except OSError as e:
        print(f"kernelscope: cannot read {args.file}: {e}", file=sys.stderr)
        return 2
    if not args.bundle:  # with a bundle, the front half writes the error into it
        early = _syntax_error(code, args.file, args.json)
        if early is not None:
            return early
    options = _options(args, entry=args.entry)
    from kernelscope.compiler.pipeline import run_front, run_pipeline

    path = str(Path(args.file).resolve())
    # Each captured graph is printed the moment Dynamo hands it over, mid-capture, and a
    # `progress` event whenever a stage has been quiet for a while.
    parts = _Printer(args)
    if args.front_only:
        return _print(run_front(code, options, args.bundle, path, parts=parts), args, parts)
    return _print(run_pipeline(code, options, path, bundle_path=args.bundle, parts=parts),
                  args, parts)


def _stages(args: argparse.Namespace) -> int:
    if not Path(args.bundle).is_file():
        print(f"kernelscope: no such bundle: {args.bundle}", file=sys.stderr)
        return 2
    code = Path(args.code).read_text(encoding="utf-8", errors="replace") if args.code else None
    options = _options(args)  # first: it sets the emulator's environment before torch loads
    from kernelscope.compiler.pipeline import run_back

    parts = _Printer(args)  # `progress` while a stage runs
    return _print(run_back(args.bundle, options, replay=not args.no_replay,
                           replay_source=not args.no_replay_source, code=code, parts=parts),
                  args, parts)


def _options(args: argparse.Namespace, entry: str | None = None) -> Any:
    device = args.device or _default_device()
    # Process start-up, before torch is imported: a backend that runs emulated here (Triton
    # on a CPU) needs its emulator switched on for this whole process, from the arguments.
    for key, value in targets.emulator_env(args.backend, device).items():
        os.environ.setdefault(key, value)
    from kernelscope.compiler.options import CompileOptions

    fields = {"device": device, "backend": args.backend, "fusion": not args.no_fusion,
              "memory_reuse": not args.no_reuse, "profile": not args.no_profile,
              "inductor": args.inductor, "entry": entry}
    if getattr(args, "options", None):
        fields.update(json.loads(args.options))
    return CompileOptions.from_mapping(fields)


class _Printer:
    """Prints one event (NDJSON or text) to the output this process started with, through
    its own copy of that file descriptor: an event printed while the snippet runs (a
    captured graph) must not reach the pipe the snippet's fd 1 is redirected to."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.shown: set[int] = set()  # graphs printed as captured (`capture_graph`)
        self.lock = threading.Lock()  # `progress` comes from a thread of its own
        self.out: Any = sys.stdout
        sys.stdout.flush()
        try:
            self.out = open(os.dup(sys.stdout.fileno()), "w", encoding="utf-8",  # noqa: SIM115
                            buffering=1)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass  # a stdout without a descriptor (a test's capture) is not redirected

    def __call__(self, event: Any) -> None:
        args = self.args
        if args.stage and event.stage not in (args.stage, "error", "done"):
            return
        if args.json:
            text = event.to_json()
        else:
            text = _text(event, frozenset(self.shown))
            if event.stage == "capture_graph":
                self.shown.add(int(event.data["id"]))
        with self.lock:
            self.out.write(text + "\n")
            self.out.flush()


def _print(events: Iterator[Any], args: argparse.Namespace, printer: _Printer) -> int:
    ok = True
    for event in events:
        printer(event)
        if event.stage == "done":
            ok = bool(event.data.get("ok"))
    return 0 if ok or args.json else 1


def _text(event: Any, shown: frozenset[int] = frozenset()) -> str:
    """The terminal report of one event, read back from its JSON as any reader would
    (`shown`: graphs printed already, as captured)."""
    from kernelscope.compiler.events.read import parse_event
    from kernelscope.compiler.report import render

    return render(parse_event(event.to_json()), shown)


def _default_device() -> str:
    try:
        import torch

        return CUDA if torch.cuda.is_available() else CPU
    except ImportError:
        return CPU


if __name__ == "__main__":
    sys.exit(main())

