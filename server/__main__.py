"""`python -m server` (and `kernelscope serve`): start the explorer on 127.0.0.1:8765."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelscope serve", description=__doc__)
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--db", help="SQLite file for traces (default ~/.local/share/kernelscope)")
    p.add_argument("--max-jobs", type=int, help="compile workers running at once")
    p.add_argument("--timeout", type=float, help="wall-clock seconds per job")
    p.add_argument(
        "--isolation", choices=("auto", "bubblewrap", "rlimits-only"), help="sandbox to use"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from server import serve

    config: dict[str, Any] = {}
    if args.db:
        config["DATABASE"] = args.db
    if args.max_jobs:
        config["MAX_JOBS"] = args.max_jobs
    if args.timeout:
        config["JOB_TIMEOUT_S"] = args.timeout
    if args.isolation:
        config["ISOLATION"] = args.isolation
    try:
        serve(args.host, args.port, config)
    except KeyboardInterrupt:
        return 0
    except (OSError, RuntimeError) as exc:
        print(f"kernelscope serve: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
