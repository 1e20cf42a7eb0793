"""Issue 20, findings 4-7 and 17: one client must not stall the rest.

The live-server cases run `kernelscope serve` (gunicorn, as deployed) on 127.0.0.1 with
the fake worker; every socket here goes to loopback, and each attack is bounded.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_support import FAKE_BACK, FAKE_WORKER, REPO, AppFactory, state, submit, wait_until

ENDLESS = "# fake-sleep: 5\nx = 1\n"
OTHER = "127.0.0.2"  # a client other than the attacker's 127.0.0.1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(self, port: int, proc: subprocess.Popen[bytes], scratch: Path) -> None:
        self.port, self.proc, self.scratch = port, proc, scratch

    def request(self, method: str, path: str, body: Any = None, timeout: float = 5.0,
                source: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
        """`source`: the loopback address to ask from (the server caps connections per
        address, so a probe beside an attack from 127.0.0.1 asks from another)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout,
                                          source_address=(source, 0))
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveServer]:
    with serve(tmp_path) as server:
        yield server


@contextlib.contextmanager
def serve(tmp_path: Path, **overrides: Any) -> Iterator[LiveServer]:
    """`kernelscope serve` on a free loopback port with the fake worker, the configuration's
    keys replaced by `overrides` (the RQ tier's QUEUE_URL and DATABASE, say)."""
    port = free_port()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    config = {
        "DATABASE": str(tmp_path / "db" / "traces.sqlite3"), "WORKER_CMD": FAKE_WORKER,
        "BACK_CMD": FAKE_BACK, "WARM_POOL": 0, "WARM_IMPORTS": [], "WARM_UP": False,
        "KERNEL_CACHE": "", "SCRATCH_ROOT": str(scratch), "JOB_TIMEOUT_S": 30,
        "HEARTBEAT_S": 0.5, "WORKER_THREADS": 1, "MAX_JOBS": 2, "JOB_STREAMS": 8,
        "CLIENT_STREAMS": 16, "CLIENT_JOBS": 2, **overrides,
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelscope.server.cli", "serve", "--port", str(port), "--config",
         str(path)], env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO,
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    server = LiveServer(port, proc, scratch)

    def up() -> bool:
        try:
            return server.request("GET", "/api/health", timeout=2)[0] == 200
        except OSError:
            return False

    try:
        # 150 s: one boot that overruns gunicorn's 60 s worker timeout is rebooted.
        assert wait_until(up, 150), (tmp_path / "server.log").read_text()[-3000:]
        yield server
    finally:
        stop_server(proc)


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # a graceful stop removes its job directories
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def test_slowloris_does_not_stall_health(live: LiveServer) -> None:
    held = []
    try:
        for _ in range(80):
            s = socket.create_connection(("127.0.0.1", live.port), timeout=5)
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            held.append(s)
        start = time.monotonic()
        status, _, _ = live.request("GET", "/api/health", timeout=10, source=OTHER)
        assert status == 200 and time.monotonic() - start < 3
        # ... and the server drops the partial requests after its header timeout (those
        # past the per-address cap at once, after a 503).
        time.sleep(7)
        dropped = 0
        for s in held:
            s.settimeout(1)
            try:
                while s.recv(4096):
                    pass
                dropped += 1
            except TimeoutError:
                pass
            except OSError:
                dropped += 1
        assert dropped == len(held)
    finally:
        for s in held:
            s.close()


def test_held_streams_are_capped_and_starve_nobody(live: LiveServer) -> None:
    status, _, body = live.request("POST", "/api/compile", {"code": ENDLESS})
    assert status == 202
    job = json.loads(body)["job_id"]
    streams, refused = [], 0
    try:
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", live.port), timeout=5)
            s.sendall(f"GET /api/jobs/{job}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            head = s.recv(200)
            refused += b" 429 " in head.split(b"\r\n")[0]
            streams.append(s)
        assert refused == 64 - 8  # JOB_STREAMS
        start = time.monotonic()
        assert live.request("GET", "/api/health", timeout=10, source=OTHER)[0] == 200
        assert time.monotonic() - start < 3
    finally:
        for s in streams:
            s.close()


def test_long_path_and_bad_highlight_answer_json(live: LiveServer) -> None:
    status, headers, body = live.request("GET", "/" + "a" * 9000)
    assert status == 414 and headers["Content-Type"] == "application/json"
    assert json.loads(body)["status"] == 414
    status, headers, body = live.request("POST", "/api/highlight",
                                         {"code": "x = 1", "language": ["python"]})
    assert status == 400 and "language" in json.loads(body)["error"]


def test_sigterm_tells_every_stream_and_leaves_nothing(live: LiveServer) -> None:
    status, _, body = live.request("POST", "/api/compile", {"code": ENDLESS})
    job = json.loads(body)["job_id"]
    conn = http.client.HTTPConnection("127.0.0.1", live.port, timeout=20)
    conn.request("GET", f"/api/jobs/{job}/events?format=ndjson")
    response = conn.getresponse()
    assert wait_until(lambda: any(live.scratch.iterdir()), 30)
    time.sleep(0.5)
    made = {p.name for p in live.scratch.iterdir()}
    os.killpg(live.proc.pid, signal.SIGTERM)
    lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    assert [e["stage"] for e in lines[-2:]] == ["error", "done"], lines[-3:]
    assert "stopping" in lines[-2]["data"]["message"]
    assert lines[-1]["data"].get("trace_id")
    live.proc.wait(20)
    assert list(live.scratch.iterdir()) == []
    # This server's cgroups (named after its job directories) are gone with them.
    assert not [g for g in Path("/sys/fs/cgroup").glob("*/kernelscope-job-*")
                if g.name.removesuffix("-back") in made]


def test_one_client_cannot_take_every_job_slot(make_app: AppFactory) -> None:
    app = make_app(MAX_JOBS=2, QUEUE_SIZE=8, CLIENT_JOBS=2, JOB_TIMEOUT_S=30)
    greedy = app.test_client()
    for _ in range(2):
        submit(greedy, ENDLESS)
    response = greedy.post("/api/compile", json={"code": ENDLESS})
    assert response.status_code == 429
    assert int(response.headers["Retry-After"]) >= 1
    assert "at most 2" in response.get_json()["error"]
    polite = app.test_client()
    ok = polite.post("/api/compile", json={"code": "x = 1\n"},
                     environ_base={"REMOTE_ADDR": "127.0.0.2"})
    assert ok.status_code == 202


@pytest.mark.embedded_only
def test_finished_jobs_are_served_from_the_store(make_app: AppFactory) -> None:
    app = make_app()
    client = app.test_client()
    job_id = submit(client, "x = 'padding' * 1000\n")
    jobs = state(app).jobs
    job = jobs.get(job_id)
    assert job is not None and wait_until(lambda: job.finished and job._archive is not None)
    assert job._events == []  # nothing but `done` is held in memory
    events = [json.loads(line) for line in client.get(
        f"/api/jobs/{job_id}/events?format=ndjson").get_data(as_text=True).splitlines() if line]
    assert [e["seq"] for e in events] == list(range(len(events))) and len(events) > 5
    assert events[-1]["stage"] == "done" and events[-1]["data"]["trace_id"]
    assert client.get(f"/api/jobs/{job_id}").get_json()["events"] == len(events)
