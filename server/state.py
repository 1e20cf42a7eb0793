"""The app's parts, built once from the runtime: the jobs and what every view reads.

In: a `Runtime` (server/runtime.py). Out: the app's `AppState` (server/web/appstate.py),
installed as its one extension: the store, the jobs (local supervisor threads running
server/jobs/worker.py's `run_job`, or RQ when `QUEUE_URL` is set), the sandbox settings,
the folders, the stream gates and the highlighter.
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask

from kernelscope.server.jobs.manager import JobManager, Jobs
from kernelscope.server.jobs.remote import RedisJobManager
from kernelscope.server.jobs.worker import run_job
from kernelscope.server.runtime import Runtime
from kernelscope.server.web.appstate import EXTENSION, AppState, of
from kernelscope.server.web.gates import StreamGate
from kernelscope.server.web.headers import CdnScript
from kernelscope.server.web.hlpool import HighlightPool


def make_jobs(runtime: Runtime) -> Jobs:
    """Where this app's jobs run: RQ workers when `QUEUE_URL` is set, else here."""
    cfg = runtime.config
    if cfg["QUEUE_URL"]:
        return RedisJobManager(cfg, runtime.store)
    settings, store, pool, kcache = runtime.settings, runtime.store, runtime.pool, runtime.kcache
    return JobManager(
        lambda job: run_job(job, settings, store, pool, kcache),
        int(cfg["MAX_JOBS"]),
        int(cfg["QUEUE_SIZE"]),
        float(cfg["JOB_RETENTION_S"]),
        pool,
        kcache,
        store=store,
        client_jobs=int(cfg["CLIENT_JOBS"]),
        retry_after_s=float(cfg["JOB_TIMEOUT_S"]),
    )


def init_app(app: Flask, runtime: Runtime, cdn: CdnScript | None) -> AppState:
    cfg = runtime.config
    found = AppState(
        runtime.store, make_jobs(runtime), runtime.settings, Path(cfg["WEBUI_DIR"]),
        Path(cfg["SAMPLES_DIR"]), cdn=cdn,
        streams=StreamGate(int(cfg["JOB_STREAMS"]), int(cfg["CLIENT_STREAMS"])),
        highlighter=HighlightPool(int(cfg["HIGHLIGHT_PROCS"]), float(cfg["HIGHLIGHT_TIMEOUT_S"]),
                                  int(cfg["HIGHLIGHT_MEMORY_MB"]), str(cfg["REPO_DIR"])),
    )
    app.extensions[EXTENSION] = found
    return found


__all__ = ["AppState", "init_app", "make_jobs", "of"]
