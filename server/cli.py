"""`kernelscope serve`, `worker` and `open`: the explorer's web tier, its queue workers, and a
recorded run opened in it.

    kernelscope serve  [--host H] [--port P] [--db FILE|postgresql://...] [--queue redis://...]
                       [--max-jobs N] [--pool N] [--workers N] [--threads N] [--debug] ...
    kernelscope worker --queue redis://... --db postgresql://... [--pool N] ...
    kernelscope open DIR [--server URL] [--db FILE] [--no-serve] [--no-browser]

`serve` runs the app under gunicorn with gevent workers (server/web/gworker.py: a greenlet per
connection, header timeouts, JSON errors, a graceful SIGTERM); `--debug` runs Werkzeug's
development server instead. `worker` takes jobs from Redis
through RQ (server/jobs/rqworker.py). Both accept `--config FILE.json`, a JSON object of the
configuration keys of docs/server.md, applied before the flags. A URL with a password
(Redis's, PostgreSQL's) is refused on the command line, which `ps` shows to every user:
it comes from $KERNELSCOPE_QUEUE_URL / $KERNELSCOPE_DATABASE or the --config file.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        help="where traces are stored: an SQLite file (default "
        "~/.local/share/kernelscope/traces.sqlite3) or a postgresql:// URL",
    )
    p.add_argument("--queue", help="redis://HOST:PORT/DB: run jobs on RQ workers (default: local)")
    p.add_argument("--queue-name", help="the RQ queue's name (default kernelscope)")
    p.add_argument("--timeout", type=float, help="wall-clock seconds per job (default 120)")
    p.add_argument(
        "--isolation", choices=("auto", "bubblewrap", "rlimits-only"), help="sandbox to use"
    )
    p.add_argument("--pool", type=int, help="warm workers kept started (default: --max-jobs)")
    p.add_argument("--scratch-root", help="where job scratch directories are made")
    p.add_argument("--config", help="a JSON file of configuration keys (docs/server.md)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kernelscope", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the explorer (web UI and API)")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    s.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    _common(s)
    s.add_argument("--max-jobs", type=int, help="local workers running at once (default 2)")
    s.add_argument("--queue-size", type=int, help="jobs waiting before 'busy' (default 8)")
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        help="gunicorn worker processes (default 1; more need --queue, since local jobs "
        "live in the serving process)",
    )
    s.add_argument(
        "--connections", type=int, default=1000,
        help="open connections (event streams included) per gunicorn worker (default 1000)",
    )
    s.add_argument("--threads", type=int, help=argparse.SUPPRESS)  # the gthread era's flag
    s.add_argument(
        "--strict", action=argparse.BooleanOptionalAction, default=None,
        help="refuse to run snippets without per-job cgroups and bubblewrap (default: on "
        "for a --host other than loopback)",
    )
    s.add_argument("--trusted-host", action="append", help="accepted Host header (repeatable)")
    s.add_argument(
        "--debug", action="store_true", help="Werkzeug's development server instead of gunicorn"
    )
    w = sub.add_parser("worker", help="run compile jobs from a Redis queue (RQ)")
    _common(w)
    w.add_argument("--name", help="the RQ worker's name (default: host and pid)")
    w.add_argument(
        "--burst", action="store_true", help="exit when the queue is empty (tests, batch runs)"
    )
    o = sub.add_parser("open", help="open a recorded trace directory in the explorer")
    o.add_argument("dir")
    o.add_argument("--server", default=None,
                   help="a running explorer to upload to (default: the local one, "
                        "http://127.0.0.1:8765, if it answers)")
    o.add_argument("--db", default=None,
                   help="with no server running: the trace database to store into "
                        "(default: kernelscope serve's)")
    o.add_argument("--no-serve", action="store_true",
                   help="with no server running: store and print the permalink only")
    o.add_argument("--no-browser", action="store_true")
    return p


def open_run(args: argparse.Namespace) -> int:
    from kernelscope.server.open_cmd import open_dir

    code, database = open_dir(args.dir, server=args.server, db=args.db,
                              serve=not args.no_serve, browser=not args.no_browser)
    return main(["serve", "--db", database]) if database else code


# URLs that may carry a password: taken from the environment (or the --config file), never
# from the command line, which every user of the host can read.
SECRET_ENV = {"QUEUE_URL": "KERNELSCOPE_QUEUE_URL", "DATABASE": "KERNELSCOPE_DATABASE"}


def config_from(args: argparse.Namespace) -> dict[str, Any]:
    """The app/worker configuration the flags ask for (only the keys they set)."""
    config: dict[str, Any] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            loaded = json.load(f)
        if not isinstance(loaded, dict):
            raise SystemExit(f"{args.config}: expected a JSON object")
        config.update(loaded)
    flags = {
        "db": "DATABASE",
        "queue": "QUEUE_URL",
        "queue_name": "QUEUE_NAME",
        "timeout": "JOB_TIMEOUT_S",
        "isolation": "ISOLATION",
        "pool": "WARM_POOL",
        "scratch_root": "SCRATCH_ROOT",
        "max_jobs": "MAX_JOBS",
        "queue_size": "QUEUE_SIZE",
        "trusted_host": "TRUSTED_HOSTS",
    }
    for attr, key in flags.items():
        value = getattr(args, attr, None)
        if value is not None:
            if key in SECRET_ENV and urlsplit(str(value)).password:
                raise SystemExit(
                    f"kernelscope: a password in --{attr} shows in `ps` to every user of "
                    f"this host; set {SECRET_ENV[key]} (or {key} in --config) instead")
            config[key] = value
    for key, env in SECRET_ENV.items():
        if key not in config and os.environ.get(env):
            config[key] = os.environ[env]
    return config


def serve_config(args: argparse.Namespace) -> dict[str, Any]:
    """The app configuration `serve` runs with: the flags, plus what the address implies."""
    config = config_from(args)
    if args.host in LOOPBACK and "TRUSTED_HOSTS" not in config:
        # A page on another site that rebinds its DNS name to 127.0.0.1 is refused.
        config["TRUSTED_HOSTS"] = ["localhost", "127.0.0.1", "::1", "[::1]"]
    if args.strict is not None:
        config["STRICT_LIMITS"] = args.strict
    elif config.get("STRICT_LIMITS") is None:
        # Serving others: snippets run only with every per-job limit in place.
        config["STRICT_LIMITS"] = args.host not in LOOPBACK
    return config


def serve(args: argparse.Namespace) -> int:
    config = serve_config(args)
    if args.workers > 1 and not config.get("QUEUE_URL"):
        print("kernelscope serve: --workers > 1 needs --queue", file=sys.stderr)
        return 2
    if args.debug:
        from kernelscope.server import serve as dev_serve

        dev_serve(args.host, args.port, config)
        return 0
    from kernelscope.server.web.wsgi import run_gunicorn

    return run_gunicorn(args.host, args.port, config, args.workers, args.connections)


def worker(args: argparse.Namespace) -> int:
    from kernelscope.server.jobs.rqworker import run_worker

    config = config_from(args)
    if not config.get("QUEUE_URL"):
        print("kernelscope worker: --queue redis://... is required", file=sys.stderr)
        return 2
    return run_worker(config, name=args.name, burst=args.burst)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "open":
        return open_run(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        return serve(args) if args.command == "serve" else worker(args)
    except KeyboardInterrupt:
        return 0
    except (OSError, RuntimeError) as exc:
        print(f"kernelscope {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
