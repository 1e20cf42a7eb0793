"""kill -9 at the worst moments: a worker mid-job (local and RQ), the server mid-write."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from server_support import (
    FAKE_WORKER,
    POSTGRES_URL,
    REPO,
    AppFactory,
    compile_events,
    drop_postgres_schema,
    first_error,
    postgres_schema_url,
    state,
    stream,
    submit,
    wait_until,
)

from kernelscope.server.web.streams import parse_sse

SLOW = "# fake-sleep: 1.0\nx = {n}\n"


def _pids(match: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if match in cmd:
                found.append(int(entry.name))
    return found


def _pgid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[2])


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _descends_from(pid: int, ancestor: int) -> bool:
    """`pid` was started, through any chain of parents, by `ancestor` (a job's processes
    lead sessions of their own, but their parents stay the server's)."""
    while pid > 1:
        pid = _ppid(pid)
        if pid == ancestor:
            return True
    return False


def _cmd(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


@pytest.mark.parametrize("pool", [0])
def test_kill_9_of_a_local_worker_fails_that_job_and_the_next_works(
    make_app: AppFactory, pool: int
) -> None:
    app = make_app(WARM_POOL=pool, JOB_TIMEOUT_S=30)
    client = app.test_client()
    warm = state(app).jobs.pool
    if pool:
        assert warm is not None and warm.wait_ready(1, timeout=30)
    job_id = submit(client, "# fake-sleep: 2\nx = 'kill-me-4242'\n")
    # The Python process inside the sandbox that runs this job (the front half, where the
    # snippet sleeps; not bubblewrap around it, not an idle warm worker, not another
    # checkout's, and not another server's: the server runs in this process, and a test
    # beside this one under pytest-xdist had its job's back half killed).
    victims: list[int] = []

    def find() -> bool:
        found = _pids(str(REPO) + "/")  # server/ or kernelscope/server/: one checkout
        idle = warm.idle_groups() if warm is not None else set()  # after: see the sandbox test
        for pid in found:
            try:
                cmd = _cmd(pid)
                worker = "worker_entry.py" in cmd or "warm.py" in cmd
                if worker and "bwrap" not in cmd and _pgid(pid) not in idle and \
                        _descends_from(pid, os.getpid()):
                    victims.append(pid)
            except OSError:
                continue
        return bool(victims)

    time.sleep(0.5)  # into the snippet's first sleep
    assert wait_until(find, 20), "the worker process was not found"
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    events = stream(client, job_id)
    error = first_error(events)
    assert error["kind"] == "killed" and "SIGKILL" in error["message"], error
    assert events[-1]["data"]["ok"] is False and events[-1]["data"]["trace_id"]
    assert compile_events(client, "x = 2\n")[-1]["data"]["ok"] is True


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_kill_9_of_an_rq_worker_fails_that_job_and_the_next_works(make_app: AppFactory) -> None:
    from rq.job import Job as RqJob

    app = make_app(JOB_TIMEOUT_S=60, MAX_JOBS=2)
    client = app.test_client()
    jobs = state(app).jobs
    job_id = submit(client, "# fake-sleep: 3\nx = 1\n")
    assert wait_until(lambda: client.get(f"/api/jobs/{job_id}").get_json()["events"] >= 1, 30)
    rq_job = RqJob.fetch(f"{jobs.ns}-{job_id}", connection=jobs.conn)  # type: ignore[attr-defined]
    name = rq_job.worker_name
    assert name, "no worker took the job"
    os.kill(int(name.rsplit("-", 1)[1]), signal.SIGKILL)  # worker names end in their pid
    start = time.monotonic()
    events = stream(client, job_id)  # the web tier notices the worker stopped beating
    assert time.monotonic() - start < 20
    error = first_error(events)
    assert error["kind"] == "killed" and "worker running this job stopped" in error["message"]
    done = events[-1]["data"]
    assert done["ok"] is False
    assert client.get(f"/api/traces/{done['trace_id']}").status_code == 200
    # The other worker takes the next job.
    assert compile_events(client, "x = 2\n")[-1]["data"]["ok"] is True


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(tmp_path: Path, database: str, port: int) -> subprocess.Popen[bytes]:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "WORKER_CMD": FAKE_WORKER,
                "WARM_IMPORTS": [],
                "WARM_UP": False,
                "MAX_JOBS": 4,
                "QUEUE_SIZE": 64,
                "KERNEL_CACHE": str(tmp_path / "kernels"),
            }
        )
    )
    cmd = [sys.executable, "-m", "kernelscope.server", "--port", str(port), "--db", database]
    proc = subprocess.Popen(
        [*cmd, "--config", str(config)],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5).close()
            return proc
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise AssertionError("the server did not start")


def _client(base: str, n: int, seen: list[str], stop: threading.Event) -> None:
    """Compile over and over, remembering every trace id a `done` event announced."""
    while not stop.is_set():
        try:
            body = json.dumps({"code": SLOW.format(n=f"{n}_{time.monotonic_ns()}")}).encode()
            req = urllib.request.Request(
                base + "/api/compile", body, {"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                job = json.load(r)
            with urllib.request.urlopen(base + job["events"], timeout=30) as r:
                for event in parse_sse(r.read().decode()):
                    if event["stage"] == "done" and event["data"].get("trace_id"):
                        seen.append(event["data"]["trace_id"])
        except (OSError, http.client.HTTPException, ValueError):
            return  # the server is gone (mid-stream, the body is cut short)


@pytest.mark.parametrize("db", ["sqlite", "postgres"])
def test_kill_9_of_the_server_mid_write_loses_no_permalink(tmp_path: Path, db: str) -> None:
    if db == "postgres" and not POSTGRES_URL:
        pytest.skip("KERNELSCOPE_TEST_POSTGRES is not set (bash scripts/services.sh start)")
    schema = f"crash{os.getpid()}_{time.monotonic_ns()}"
    database = str(tmp_path / "traces.sqlite3") if db == "sqlite" else postgres_schema_url(schema)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = _start_server(tmp_path, database, port)
    seen: list[str] = []
    stop = threading.Event()
    clients = [threading.Thread(target=_client, args=(base, i, seen, stop)) for i in range(6)]
    try:
        for thread in clients:
            thread.start()
        # Jobs finish about every quarter second from here on: kill while traces are written.
        assert wait_until(lambda: len(seen) >= 8, timeout=90), len(seen)
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(10)
        stop.set()
        for thread in clients:
            thread.join(40)
        announced = list(seen)
        restarted = _start_server(tmp_path, database, port)
        try:
            missing: list[Any] = []
            for ident in announced:
                try:
                    urllib.request.urlopen(f"{base}/api/traces/{ident}", timeout=10).close()
                except OSError as exc:
                    missing.append((ident, str(exc)))
            assert not missing, f"{len(missing)} of {len(announced)} permalinks lost: {missing}"
        finally:
            os.killpg(restarted.pid, signal.SIGKILL)
            restarted.wait(10)
    finally:
        stop.set()
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        if db == "postgres":
            drop_postgres_schema(schema)
