"""The app's one extension: the jobs and the runtime every view reads.

In: a `Runtime` (server/runtime.py). Out: an `AppState` in `app.extensions["kernelscope"]`
(so two apps in one process, as the tests make, never share anything), holding the store,
the jobs (local supervisor threads, or RQ when `QUEUE_URL` is set), the sandbox settings,
the folders, and the gates that keep one client from holding every stream.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import Flask, current_app

from kernelscope.server.jobs import info
from kernelscope.server.jobs.manager import JobManager, Jobs
from kernelscope.server.jobs.remote import RedisJobManager
from kernelscope.server.jobs.worker import WorkerSettings, run_job
from kernelscope.server.runtime import Runtime
from kernelscope.server.store.rows import Store
from kernelscope.server.web.gates import StreamGate
from kernelscope.server.web.headers import CdnScript
from kernelscope.server.web.hlpool import HighlightPool

EXTENSION = "kernelscope"


@dataclass
class AppState:
    store: Store
    jobs: Jobs
    settings: WorkerSettings
    webui_dir: Path
    samples_dir: Path
    cdn: CdnScript | None = None  # the one CDN script the page may load (server/web/headers.py)
    streams: StreamGate = field(default_factory=lambda: StreamGate(8, 16))
    # /api/highlight's child processes (server/web/hlpool.py), started on first use.
    highlighter: HighlightPool | None = None
    _devices: dict[str, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def devices(self) -> dict[str, Any]:
        """The host's devices, probed once (nvidia-smi can take a moment).

        The probe runs outside the lock: under gevent its subprocesses yield, and a second
        caller blocked on the OS lock would hang the worker's only thread (docs/perf.md,
        "Notes behind other comments"). Two racing probes find the same devices; the first
        kept wins.
        """
        found = self._devices
        if found is None:
            probed = info.devices()
            with self._lock:
                if self._devices is None:
                    self._devices = probed
                found = self._devices
        return found


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


def of(app: Flask) -> AppState:
    found: AppState = app.extensions[EXTENSION]
    return found


def app_state() -> AppState:
    return of(current_app)  # type: ignore[arg-type]
