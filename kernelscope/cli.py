"""The `kernelscope` command: one small entry point that sends each command where it belongs.

    kernelscope compile | stages | run ...   the compiler (compiler/cli.py)
    kernelscope serve | worker | open ...    the explorer (server/cli.py)

The compiler is a library that never imports the server, so the two command lines live
apart; this module is the only place that knows both.
"""

from __future__ import annotations

import sys

SERVER_COMMANDS = ("serve", "worker", "open")
HELP = """usage: kernelscope COMMAND ...

compiler:  compile FILE.py | stages BUNDLE | run [--inductor] SCRIPT.py
           (kernelscope compile --help; run --inductor opens the TORCH_TRACE log)
explorer:  serve | worker | open DIR                        (kernelscope serve --help)
"""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(HELP, end="")
        return 0 if argv else 2
    if argv[0] in SERVER_COMMANDS:
        from kernelscope.server.cli import main as server_main

        return server_main(argv)
    from kernelscope.compiler.runtime.openmp import wait_passively

    wait_passively()  # before the compiler loads torch (and OpenMP with it)
    from kernelscope.compiler.cli import main as compiler_main
    from kernelscope.compiler.cli import traced_run

    argv, log_dir = traced_run(argv)
    code = compiler_main(argv)
    if log_dir is None or not any(log_dir.glob("*.log")):
        return code
    from kernelscope.server.cli import main as server_main

    return server_main(["open", str(log_dir)])


if __name__ == "__main__":
    sys.exit(main())
