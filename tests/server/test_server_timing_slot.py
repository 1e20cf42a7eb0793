"""The host's timing lock: every worker opens the same file (read-only in its sandbox) and
flocks it while it times, so one job times at a time across the server's workers."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from server_support import AppFactory, compile_events, first_error

from kernelscope.compiler.runtime.slot import LOCK_ENV

PROBE = (
    "import fcntl, os\n"
    f"path = os.environ[{LOCK_ENV!r}]\n"
    "fd = os.open(path, os.O_RDONLY)\n"
    "try:\n"
    "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "    raise SystemExit(f'took the lock at {path}')\n"
    "except BlockingIOError:\n"
    "    raise SystemExit(f'held by another process: {path}')\n"
)


def test_a_worker_sees_the_lock_another_process_holds(make_app: AppFactory,
                                                      tmp_path: Path) -> None:
    folder = tmp_path / "timing"
    tmp_path.chmod(0o755)
    # The job's wall clock is not what this test is about: the server tests' 5 s (a
    # sandboxed cold Python start, the probe and its exit) can run out on a loaded host,
    # and then the job's error is the timeout, not the probe's answer.
    app = make_app(TIMING_DIR=str(folder), JOB_TIMEOUT_S=60)
    lock = folder / "timing.lock"
    assert lock.is_file() and app.config["WORKER_ENV"][LOCK_ENV] == str(lock)
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a timing in progress elsewhere
        held = first_error(compile_events(app.test_client(), PROBE))
    finally:
        os.close(fd)
    assert f"held by another process: {lock}" in held["message"]
    free = first_error(compile_events(app.test_client(), PROBE))
    assert f"took the lock at {lock}" in free["message"]
