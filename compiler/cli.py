"""The `kernelscope` command: compile a snippet and print every stage, or serve the UI.

    kernelscope compile FILE.py [--device cpu|cuda] [--backend cpp|triton]
                                [--stage NAME] [--json] [--no-fusion] [--inductor]
    kernelscope serve [--host 127.0.0.1] [--port 8765]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelscope", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile a snippet and show every stage")
    c.add_argument("file")
    c.add_argument("--device", choices=["cpu", "cuda"], default=None,
                   help="where tensors live (default: cuda if available, else cpu)")
    c.add_argument("--backend", choices=["auto", "cpp", "triton"], default="auto")
    c.add_argument("--stage", default=None, help="print only this stage")
    c.add_argument("--json", action="store_true", help="one JSON event per line")
    c.add_argument("--entry", default=None, help="function or module to compile")
    c.add_argument("--no-fusion", action="store_true")
    c.add_argument("--no-reuse", action="store_true", help="no buffer reuse")
    c.add_argument("--no-profile", action="store_true")
    c.add_argument("--inductor", action="store_true", help="also time TorchInductor")
    s = sub.add_parser("serve", help="run the explorer (web UI and API)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8765)
    s.add_argument("--db", default=None)
    sub.add_parser("worker", help="run compile jobs from a Redis queue (see serve --help)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["serve"], ["worker"]):  # the server's commands live in server/cli.py
        from server.cli import main as server_main

        return server_main(argv)
    args = _parser().parse_args(argv)
    if args.command == "serve":
        from server.__main__ import main as serve_main

        rest = ["--host", args.host, "--port", str(args.port)]
        if args.db:
            rest += ["--db", args.db]
        return serve_main(rest)
    return _compile(args)


def _syntax_error(code: str, filename: str, as_json: bool) -> int | None:
    """Report a syntax error before importing torch (which takes seconds)."""
    import ast

    from compiler.events import StageEvent

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
                from compiler.report import render

                print(render(ev.to_dict()), flush=True)
        return 0 if as_json else 1
    return None


def _compile(args: argparse.Namespace) -> int:
    try:
        code = Path(args.file).read_text()
    except OSError as e:
        print(f"kernelscope: cannot read {args.file}: {e}", file=sys.stderr)
        return 2
    early = _syntax_error(code, args.file, args.json)
    if early is not None:
        return early
    device = args.device or _default_device()
    if args.backend == "triton" and device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before torch imports triton
    from compiler.options import CompileOptions
    from compiler.pipeline import run_pipeline

    path = Path(args.file)
    options = CompileOptions(device=device, backend=args.backend, fusion=not args.no_fusion,
                             memory_reuse=not args.no_reuse, profile=not args.no_profile,
                             inductor=args.inductor, entry=args.entry)
    ok = True
    for event in run_pipeline(code, options, str(path.resolve())):
        if args.stage and event.stage not in (args.stage, "error", "done"):
            continue
        if args.json:
            print(event.to_json(), flush=True)
        else:
            from compiler.report import render

            print(render(event.to_dict()), flush=True)
        if event.stage == "done":
            ok = bool(event.data.get("ok"))
    return 0 if ok or args.json else 1


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


if __name__ == "__main__":
    sys.exit(main())

