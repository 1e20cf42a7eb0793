"""The first code a sandboxed worker runs: give the events a channel of their own.

In: `python worker_entry.py --events-fd N -- (-m MODULE | SCRIPT) ARGS...`, started by
server/jobs/worker.py inside the sandbox with pipe N open. Out: the module or script runs in
this process with `sys.stdout` writing to pipe N (where the compiler prints its NDJSON
events), while file descriptor 1 stays the pipe the server treats as the snippet's output:
data, never events. So a snippet that writes event-shaped lines to fd 1 (`os.write(1, ...)`,
`sys.__stdout__`, a subprocess) forges nothing.

Only the standard library is imported here, and this file's folder is taken off sys.path,
so nothing in server/ shadows a module the compiler imports.
"""

from __future__ import annotations

import os
import runpy
import sys


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[0] != "--events-fd" or argv[2] != "--":
        raise SystemExit("usage: worker_entry.py --events-fd N -- (-m MODULE | SCRIPT) ARGS...")
    fd, rest = int(argv[1]), argv[3:]
    os.set_inheritable(fd, False)  # processes the snippet starts do not get the channel
    sys.stdout = open(fd, "w", encoding="utf-8", buffering=1, closefd=True)  # noqa: SIM115
    if rest[0] == "-m":
        sys.argv = [rest[1], *rest[2:]]
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(rest)
        sys.path.insert(0, os.path.dirname(os.path.abspath(rest[0])))
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
        sys.path.pop(0)
    main(sys.argv[1:])
