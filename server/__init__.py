"""Kernelscope's server: HTTP and Server-Sent Events around the compiler.

`create_app(config)` builds a Flask app with two blueprints: `api` (compile jobs, event
streams, traces, samples, health, highlighting) and `pages` (the web UI and `/t/<id>`).
Compiles never run in this process: each one is a sandboxed worker process running the
compiler CLI (server/worker.py, server/sandbox.py). Finished traces are stored in SQLite
(server/store.py). docs/server.md describes the API, the sandbox and the configuration.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

from flask import Flask

from server import api, cgroups, headers, pages, scratch
from server.errors import register_error_handlers
from server.jobs import JobManager, Jobs
from server.kcache import shared_kernel_cache
from server.pool import WarmPool
from server.sandbox import Limits, SandboxSpec, default_readonly_paths, probe_isolation
from server.state import EXTENSION, AppState
from server.store import is_url, open_store
from server.worker import WorkerSettings, run_job

__all__ = ["create_app", "serve"]

REPO_DIR = Path(__file__).resolve().parent.parent


def default_database() -> str:
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return str(Path(data_home) / "kernelscope" / "traces.sqlite3")


def default_kernel_cache() -> str:
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return str(Path(cache_home) / "kernelscope" / "server-kernels")


def default_config() -> dict[str, Any]:
    webui = REPO_DIR / "webui"
    if not webui.is_dir():
        webui = Path(__file__).resolve().parent / "static"  # an installed wheel's copy
    return {
        "DATABASE": default_database(),  # an SQLite file, or a postgresql:// URL
        "QUEUE_URL": None,  # redis://...: jobs go to RQ workers (server/queue.py)
        "QUEUE_NAME": "kernelscope",  # the RQ queue (and the Redis key prefix)
        "MAX_JOBS": 2,  # workers running at once
        "QUEUE_SIZE": 8,  # jobs waiting; beyond that POST /api/compile answers 503
        "JOB_TIMEOUT_S": 120,  # wall clock per job
        "CPU_LIMIT_S": 300,  # RLIMIT_CPU per worker process (all its threads)
        "MEMORY_LIMIT_MB": 4096,  # RLIMIT_DATA per worker process
        "FILE_SIZE_LIMIT_MB": 256,  # RLIMIT_FSIZE: largest file a worker may write
        "SCRATCH_LIMIT_MB": 1024,  # all files in the job's scratch directory together
        "PROCESS_LIMIT": 512,  # RLIMIT_NPROC (threads included) for the sandbox uid
        "OUTPUT_LIMIT_MB": 16,  # worker stdout (the event stream)
        "EVENT_LIMIT_KB": 4096,  # one event
        "EVENT_COUNT_LIMIT": 1000,  # events per job
        "TRACE_LIMIT_MB": 8,  # a job's events together: the stored trace
        "MAX_CODE_BYTES": 64 * 1024,
        "MAX_CONTENT_LENGTH": 1 << 20,
        "HIGHLIGHT_LIMIT_KB": 256,  # largest /api/highlight input (Pygments: ~1 s per 256 KiB)
        "HEARTBEAT_S": 2.0,
        "JOB_RETENTION_S": 900,  # finished jobs stay streamable this long
        # The front half (runs the snippet, writes the capture bundle) and the back half
        # (our code on the bundle). BACK_CMD None: WORKER_CMD runs the whole pipeline in one
        # process, and the trace says every event came from the snippet's process.
        "WORKER_CMD": [sys.executable, "-m", "compiler", "compile"],
        "BACK_CMD": [sys.executable, "-m", "compiler", "stages"],
        "WORKER_THREADS": min(os.cpu_count() or 1, 16),  # OMP_NUM_THREADS in the worker
        "WORKER_ENV": {},  # extra environment variables for the worker
        "WARM_POOL": None,  # warm workers kept started (None: MAX_JOBS; 0: every job cold)
        "WARM_IMPORTS": ["torch", "compiler.pipeline", "compiler.cli"],  # imported when warm
        "WARM_UP": True,  # warm workers compile a built-in snippet before taking a job
        "KERNEL_CACHE": default_kernel_cache(),  # shared across jobs ("" turns it off)
        "ISOLATION": "auto",  # "auto", "bubblewrap" (required) or "rlimits-only"
        "CGROUPS": "auto",  # "auto" (per-job cgroups where the host allows) or "off"
        "CGROUP_PARENT": None,  # a delegated cgroup v2 directory for job groups
        "SANDBOX_UID": 65534,  # the uid/gid workers drop to when the server runs as root
        "SANDBOX_GID": 65534,
        "EXTRA_RO_PATHS": [],  # more host paths the sandbox shows read-only
        "SCRATCH_ROOT": None,  # where scratch directories are made (None: the system tmp)
        "REPO_DIR": str(REPO_DIR),
        "WEBUI_DIR": str(webui),
        "SAMPLES_DIR": str(REPO_DIR / "samples"),
        "TRUSTED_HOSTS": None,
    }


def _sandbox_spec(cfg: dict[str, Any]) -> SandboxSpec:
    repo = Path(cfg["REPO_DIR"])
    db = "" if is_url(cfg["DATABASE"]) else str(Path(cfg["DATABASE"]).resolve())
    return SandboxSpec(
        readonly=default_readonly_paths(repo, cfg["EXTRA_RO_PATHS"]),
        hidden=(os.path.dirname(db),) if db else (),
        masked=(db, db + "-wal", db + "-shm", db + "-journal") if db else (),
        env={str(k): str(v) for k, v in cfg["WORKER_ENV"].items()},
        threads=int(cfg["WORKER_THREADS"]),
    )


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """The app factory. `config` overrides the defaults of `default_config()`."""
    app = Flask(__name__, static_folder=None)
    app.config.from_mapping(default_config())
    if config:
        app.config.from_mapping(config)
    cfg = app.config
    store = open_store(cfg["DATABASE"])  # before the sandbox probe: it hides this folder
    limits = Limits.from_config(cfg)
    if cfg["KERNEL_CACHE"]:
        # Jobs see the shared kernel cache read-only (server/kcache.py).
        Path(cfg["KERNEL_CACHE"]).mkdir(parents=True, exist_ok=True, mode=0o755)
        cfg["EXTRA_RO_PATHS"] = [*cfg["EXTRA_RO_PATHS"], str(cfg["KERNEL_CACHE"])]
    spec = _sandbox_spec(cfg)
    repo = Path(cfg["REPO_DIR"])
    groups = (
        cgroups.probe(cfg["CGROUP_PARENT"]) if cfg["CGROUPS"] != "off"
        else cgroups.CgroupSupport("none", note="per-job cgroups are off (CGROUPS='off')")
    )
    isolation = probe_isolation(
        cfg["ISOLATION"], spec, limits, repo, int(cfg["SANDBOX_UID"]), int(cfg["SANDBOX_GID"]),
        groups,
    )
    swept = scratch.sweep(cfg["SCRATCH_ROOT"], min_age_s=2 * limits.wall_s + 60)
    if swept:
        app.logger.warning("removed %d scratch directories left by a stopped server", swept)
    for note in isolation.notes:
        app.logger.warning("sandbox: %s", note)
    settings = WorkerSettings(
        command=tuple(cfg["WORKER_CMD"]),
        isolation=isolation,
        spec=spec,
        limits=limits,
        repo_dir=repo,
        scratch_root=cfg["SCRATCH_ROOT"],
        back_command=tuple(cfg["BACK_CMD"]) if cfg["BACK_CMD"] else None,
    )
    jobs: Jobs
    if cfg["QUEUE_URL"]:
        from server.queue import RedisJobManager  # jobs run on `kernelscope worker` hosts

        jobs = RedisJobManager(dict(cfg), store)
    else:
        kcache = shared_kernel_cache(cfg["KERNEL_CACHE"], settings)
        if cfg["KERNEL_CACHE"] and kcache is None:
            app.logger.warning("kernel cache: not shared (a job could write it)")
        pool = WarmPool(
            settings,
            int(cfg["MAX_JOBS"] if cfg["WARM_POOL"] is None else cfg["WARM_POOL"]),
            list(cfg["WARM_IMPORTS"]),
            bool(cfg["WARM_UP"]),
            kcache=kcache,
        )
        jobs = JobManager(
            lambda job: run_job(job, settings, store, pool, kcache),
            int(cfg["MAX_JOBS"]),
            int(cfg["QUEUE_SIZE"]),
            float(cfg["JOB_RETENTION_S"]),
            pool,
            kcache,
        )
    webui = Path(cfg["WEBUI_DIR"])
    cdn = headers.cdn_script(webui)
    app.extensions[EXTENSION] = AppState(
        store, jobs, settings, webui, Path(cfg["SAMPLES_DIR"]), cdn=cdn
    )
    headers.register(app, cdn)
    app.register_blueprint(api.bp)
    app.register_blueprint(pages.bp)
    register_error_handlers(app)
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
    state: AppState = app.extensions[EXTENSION]
    mode = state.settings.isolation.mode
    state.jobs.warm()
    print(f"Kernelscope on http://{host}:{port}/  (sandbox: {mode})", flush=True)
    run_simple(host, port, app, threaded=True, use_reloader=False, use_debugger=False)
