"""`python -m kernelscope.server` is `kernelscope serve` (see server/cli.py): the explorer on
127.0.0.1:8765 under gunicorn, or Werkzeug's development server with `--debug`."""

from __future__ import annotations

import sys

from kernelscope.server.cli import main


def run(argv: list[str] | None = None) -> int:
    return main(["serve", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(run())
