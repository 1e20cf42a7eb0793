"""What every view reads: the app's parts, as the web tier sees them.

In: the parts server/state.py builds from a `Runtime` when the app is made. Out: an
`AppState` in `app.extensions["kernelscope"]` (so two apps in one process, as the tests
make, never share anything), holding the store, the jobs (local supervisor threads, or RQ
when `QUEUE_URL` is set), the sandbox settings, the folders, and the gates that keep one
client from holding every stream; `app_state()` inside a request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import Flask, current_app

from kernelscope.server.jobs import info
from kernelscope.server.jobs.manager import Jobs
from kernelscope.server.jobs.worker import WorkerSettings
from kernelscope.server.store.readsplit import ReadSplits
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
    # Big traces stored whole, split when a client asks for parts (server/store/readsplit.py).
    splits: ReadSplits = field(default_factory=ReadSplits)
    _devices: dict[str, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def warm(self) -> None:
        """Start what a server keeps started (warm workers, highlighting children), so its
        first requests do not wait for them."""
        self.jobs.warm()
        if self.highlighter is not None:
            self.highlighter.warm()

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


def of(app: Flask) -> AppState:
    found: AppState = app.extensions[EXTENSION]
    return found


def app_state() -> AppState:
    return of(current_app)  # type: ignore[arg-type]
