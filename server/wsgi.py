"""The production server: the app under gunicorn, gthread workers.

In: a host, port and app configuration (from `kernelscope serve`). Out: a running gunicorn
arbiter that creates the app inside each worker process (never before the fork, so no
thread or warm worker crosses one).

Why gthread: an event stream holds its connection for the whole compile, and a thread per
connection is exactly that; gunicorn's worker timeout only watches the worker's main loop,
which keeps beating while request threads stream, so a long stage is never cut. With local
jobs there is one worker process (the jobs live in its memory); with `--queue` the web tier
is stateless and can run several. `gunicorn 'server.wsgi:application()'` works too, with
the configuration in KERNELSCOPE_CONFIG (a JSON file).
"""

from __future__ import annotations

import json
import os
from typing import Any

from flask import Flask


def make_app(config: dict[str, Any]) -> Flask:
    from server import create_app
    from server.state import EXTENSION

    app = create_app(config)
    app.extensions[EXTENSION].jobs.warm()  # warm workers start now, not on the first click
    return app


def application() -> Flask:
    """For `gunicorn 'server.wsgi:application()'`: config from $KERNELSCOPE_CONFIG."""
    path = os.environ.get("KERNELSCOPE_CONFIG")
    config: dict[str, Any] = {}
    if path:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    return make_app(config)


def run_gunicorn(host: str, port: int, config: dict[str, Any], workers: int, threads: int) -> int:
    from gunicorn.app.base import BaseApplication

    options = {
        "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        "workers": max(1, workers),
        "worker_class": "gthread",
        "threads": max(1, threads),
        "timeout": 60,  # the worker's heartbeat, not a request limit (see the docstring)
        "graceful_timeout": 10,
        "keepalive": 5,
        "accesslog": "-",
        "errorlog": "-",
        "proc_name": "kernelscope",
    }

    class Server(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Flask:
            return make_app(config)

    print(f"Kernelscope on http://{host}:{port}/  (gunicorn, {workers} x {threads} threads)")
    Server().run()
    return 0
