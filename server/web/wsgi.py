"""The production server: the app under gunicorn, gevent workers (server/web/gworker.py).

In: a host, port and app configuration (from `kernelscope serve`). Out: a running gunicorn
arbiter that creates the app inside each worker process (never before the fork, so no
thread or warm worker crosses one).

An event stream holds its connection for the whole compile: a greenlet per connection
(server/web/gworker.py says why gevent), at most `connections` per worker; a request's
headers must arrive within `HEADER_TIMEOUT_S` (gunicorn's async `keepalive` bound). A
SIGTERM stops gracefully: every job is ended with an error saying the server is stopping
(its stream gets that and `done`, its trace is stored, its sandbox removed), then the
worker exits. With local jobs there is one worker process (the jobs live in its memory);
with `--queue` the web tier is stateless and can run several. A request body must
arrive by a deadline, and one address holds at most `CLIENT_CONNECTIONS` connections
(server/web/gworker.py). Each server has a control socket of its own. `gunicorn
'kernelscope.server.web.wsgi:application()'` works too, with the configuration in
KERNELSCOPE_CONFIG.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from flask import Flask

HEADER_TIMEOUT_S = 5
STOPPING = "The server is stopping"


def make_app(config: dict[str, Any]) -> Flask:
    from kernelscope.server import create_app, state
    from kernelscope.server.web.gworker import Worker

    app = create_app(config)
    Worker.per_address = int(app.config["CLIENT_CONNECTIONS"])
    Worker.proxy_hops = int(app.config["PROXY_HOPS"])
    parts = state.of(app)
    parts.warm()  # warm workers and highlighters start now, not on the first click
    jobs = parts.jobs
    Worker.on_term.append(lambda: jobs.stop(STOPPING))
    return app


def application() -> Flask:
    """For `gunicorn 'kernelscope.server.web.wsgi:application()'`: config from
    $KERNELSCOPE_CONFIG."""
    path = os.environ.get("KERNELSCOPE_CONFIG")
    config: dict[str, Any] = {}
    if path:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    return make_app(config)


def run_gunicorn(host: str, port: int, config: dict[str, Any], workers: int,
                 connections: int) -> int:
    from gunicorn.app.base import BaseApplication

    # Its own control socket (gunicorn's default, ~/.gunicorn/gunicorn.ctl, is one path
    # that every server of the user shares), in a directory only this user can enter.
    control = Path(tempfile.mkdtemp(prefix="kernelscope-gunicorn-"))
    options = {
        "control_socket": str(control / "gunicorn.ctl"),
        "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        "workers": max(1, workers),
        "worker_class": "kernelscope.server.web.gworker.Worker",
        "worker_connections": max(1, connections),
        "timeout": 60,  # the worker's heartbeat, not a request limit (see the docstring)
        "graceful_timeout": 10,  # jobs are stopped at once; their streams end within this
        "keepalive": HEADER_TIMEOUT_S,  # also the bound on reading a request's headers
        "limit_request_line": 8190,
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

    print(f"Kernelscope on http://{host}:{port}/  (gunicorn, {workers} x gevent, "
          f"{connections} connections)", flush=True)
    arbiter = os.getpid()
    try:
        Server().run()
    finally:
        if os.getpid() == arbiter:  # a worker leaves through here too, after its fork
            shutil.rmtree(control, ignore_errors=True)
    return 0
