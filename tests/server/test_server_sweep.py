"""Issue 30, attack 1's leftovers: a web worker killed mid-job left its job's tmpfs mounts
and cgroups, and the new worker's sweep skipped them for being younger than 300 s. A dead
job's directory (and mount) is taken whatever its age, as soon as its lock is free; a live
job's never is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kernelscope.server.sandbox import scratch

REPO = Path(__file__).resolve().parents[2]

# A process that makes a job directory (a tmpfs when root can mount one) and waits to die.
HOLDER = r"""
import sys, time
from kernelscope.server.sandbox.scratch import JobDir
try:
    job = JobDir(sys.argv[1], None, None, 16 if sys.argv[2] == "1" else None)
except OSError:
    job = JobDir(sys.argv[1], None, None, None)
print(job.path, job.mounted, flush=True)
time.sleep(600)
"""


def _dead_job(root: Path) -> tuple[Path, bool]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root),
                             "1" if os.geteuid() == 0 else "0"],
                            stdout=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.stdout is not None
    path, mounted = proc.stdout.readline().split()
    os.kill(proc.pid, signal.SIGKILL)  # as gunicorn kills a worker past its heartbeat
    proc.wait(10)
    return Path(path), mounted == "True"


def test_a_dead_jobs_directory_and_mount_go_at_once_a_live_ones_stay(tmp_path: Path) -> None:
    dead, mounted = _dead_job(tmp_path)
    live = scratch.JobDir(str(tmp_path), None, None, None)
    try:
        assert dead.is_dir() and scratch.is_mount(dead) == mounted
        assert scratch.sweep(str(tmp_path)) == 1  # seconds old, swept all the same
        assert not dead.exists() and not scratch.lock_path(dead).exists()
        assert live.path.is_dir()
        assert scratch.sweep(str(tmp_path)) == 0
    finally:
        live.remove()
    assert sorted(tmp_path.iterdir()) == []
