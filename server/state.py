"""The per-app state every view reads: store, jobs, sandbox settings, folders.

It lives in `app.extensions["kernelscope"]`, so two apps in one process (as the tests make)
never share anything.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flask import current_app

from server import info
from server.headers import CdnScript
from server.jobs import Jobs
from server.store import Store
from server.worker import WorkerSettings

EXTENSION = "kernelscope"


@dataclass
class AppState:
    store: Store
    jobs: Jobs
    settings: WorkerSettings
    webui_dir: Path
    samples_dir: Path
    cdn: CdnScript | None = None  # the one CDN script the page may load (server/headers.py)
    # At most one /api/highlight computation at a time (see api.highlight).
    highlight_slot: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(1))
    _devices: dict[str, Any] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def devices(self) -> dict[str, Any]:
        """The host's devices, probed once (nvidia-smi can take a moment)."""
        with self._lock:
            if self._devices is None:
                self._devices = info.devices()
            return self._devices


def app_state() -> AppState:
    state: AppState = current_app.extensions[EXTENSION]
    return state
