"""Kernelscope's server: HTTP and Server-Sent Events around the compiler.

`create_app(config)` is the app factory, in the shape of Flask's tutorial app: the
configuration (server/config.py), the one extension (server/state.py: the jobs and the
runtime that `build_runtime` makes, server/runtime.py), the security headers, and two
blueprints: `api` (compile jobs, event streams, traces, samples, health, highlighting)
and `pages` (the web UI and `/t/<id>`). Compiles never run in this process: each one is a
sandboxed worker process running the compiler CLI (server/jobs/worker.py, server/sandbox/launch.py).
docs/server.md describes the API, the sandbox and the configuration.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from flask import Flask

from kernelscope.server import state
from kernelscope.server.config import default_config
from kernelscope.server.runtime import build_runtime
from kernelscope.server.web import api, headers, pages, uploads
from kernelscope.server.web.errors import register_error_handlers

__all__ = ["create_app", "default_config", "serve"]


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """The app factory. `config` overrides the defaults of `default_config()`."""
    app = Flask(__name__, static_folder=None)
    app.config.from_mapping(default_config())
    if config:
        app.config.from_mapping(config)
    runtime = build_runtime(app.config, runs_jobs=not app.config["QUEUE_URL"])
    app.config.from_mapping(runtime.config)  # the folders and paths it settled
    cdn = headers.cdn_script(Path(app.config["WEBUI_DIR"]))
    state.init_app(app, runtime, cdn)
    headers.register(app, cdn)
    app.register_blueprint(api.bp)
    app.register_blueprint(uploads.bp)
    app.register_blueprint(pages.bp)
    register_error_handlers(app)
    if int(app.config["PROXY_HOPS"]):
        # Behind a TLS proxy: the client is the address the proxy saw (the per-client caps).
        from werkzeug.middleware.proxy_fix import ProxyFix

        hops = int(app.config["PROXY_HOPS"])
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops)  # type: ignore[method-assign]
    return app


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve(host: str = "127.0.0.1", port: int = 8765, config: dict[str, Any] | None = None) -> None:
    """Run the app on a threaded server: one thread per connection, no stream timeout."""
    from werkzeug.serving import run_simple

    config = dict(config or {})
    if host in LOOPBACK and "TRUSTED_HOSTS" not in config:
        # A page on another site that rebinds its DNS name to 127.0.0.1 is refused.
        config["TRUSTED_HOSTS"] = ["localhost", "127.0.0.1", "::1", "[::1]"]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    app = create_app(config)
    parts = state.of(app)
    mode = parts.settings.isolation.mode
    parts.warm()
    print(f"Kernelscope on http://{host}:{port}/  (sandbox: {mode})", flush=True)
    run_simple(host, port, app, threaded=True, use_reloader=False, use_debugger=False)
