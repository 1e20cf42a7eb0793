"""/api/health under the server's gevent worker: two at once never hang the worker.

Found by the extension inside code-server (scripts/code_server_smoke.py): on a loaded host the
extension's health poll (1.5 s per try) sent a second /api/health while the first was still
probing the host's devices. The probe's `uname -p` subprocess yields under gevent, and the
probe held `AppState._lock`, an OS lock (the dataclass takes `threading.Lock` at import,
before gunicorn's worker patches threading): the second request blocked the worker's only
thread on it, the first could never resume, and gunicorn killed the worker every 60 s.

The test imports the server before patching, as gunicorn's arbiter does, then runs two
health requests in greenlets against a device probe that yields, in a subprocess (gevent's
patching is for the whole process).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = r"""
import sys
from kernelscope.server import create_app
from kernelscope.server.jobs import info   # imported before patching, as in gunicorn
from gevent import monkey
monkey.patch_all()
import gevent

probes = []
def slow_devices():          # what info.devices() does: a subprocess, which yields
    probes.append(1)
    gevent.sleep(0.3)
    return {"cpu": {"name": "test"}, "cuda": False, "gpus": [], "gpu": None}
info.devices = slow_devices

app = create_app({"DATABASE": sys.argv[1], "WARM_POOL": 0, "KERNEL_CACHE": ""})
client = app.test_client()
def health():
    return client.get("/api/health")
jobs = [gevent.spawn(health) for _ in range(2)]
gevent.joinall(jobs, timeout=20)
done = [j.value for j in jobs if j.ready()]
print("answered", len(done), [r.status_code for r in done], "probes", len(probes))
sys.exit(0 if len(done) == 2 and all(r.status_code == 200 for r in done) else 1)
"""


def test_two_health_requests_at_once_both_answer_under_gevent(tmp_path: Path) -> None:
    try:
        run = subprocess.run(
            [sys.executable, "-P", "-c", PROGRAM, str(tmp_path / "t.sqlite3")],
            cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=90,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError("the worker's thread hung: a health request blocked on the "
                             "devices lock while another waited for the probe") from e
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "answered 2 [200, 200]" in run.stdout
