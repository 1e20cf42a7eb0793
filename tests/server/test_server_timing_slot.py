"""The host's timing lock: every worker opens the same file (read-only in its sandbox) and
flocks it while it times, so one job times at a time across the server's workers."""

from __future__ import annotations

import subprocess
import sys
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
    # A timing in progress elsewhere: another process holds the lock. (Held from this
    # process, a child forked meanwhile, one of the server's, would keep holding it after
    # its close: a flock belongs to the open file, which a fork shares.)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; "
         "fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); "
         "print('locked', flush=True); time.sleep(600)", str(lock)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        held = first_error(compile_events(app.test_client(), PROBE))
    finally:
        holder.kill()
        holder.wait()
    assert f"held by another process: {lock}" in held["message"]
    free = first_error(compile_events(app.test_client(), PROBE))
    assert f"took the lock at {lock}" in free["message"]
