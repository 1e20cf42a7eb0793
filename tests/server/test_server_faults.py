"""Issue 20, findings 13-16: faults of Redis and PostgreSQL must lose nothing.

Against real services (scripts/services.sh; CI starts them). The Redis restart runs a
Redis of its own on a free loopback port, so killing it touches no other test.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from server_support import (
    POSTGRES_URL,
    REDIS_URL,
    REPO,
    AppFactory,
    compile_events,
    drop_postgres_schema,
    postgres_schema_url,
    start_rq_workers,
    state,
    stop_rq_workers,
    submit,
    wait_until,
)

from kernelscope.server.config import default_config
from kernelscope.server.web.streams import parse_sse

needs_pg = pytest.mark.skipif(not POSTGRES_URL, reason="KERNELSCOPE_TEST_POSTGRES not set")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="KERNELSCOPE_TEST_REDIS not set")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_pg
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_postgres_down_mid_job_spools_the_trace_and_old_permalinks_answer_503(
    make_app: AppFactory, backend: str
) -> None:
    app = make_app()
    client = app.test_client()
    old = compile_events(client, "x = 1\n")[-1]["data"]["trace_id"]
    store = state(app).store
    inner: Any = store.inner  # type: ignore[attr-defined]
    url = inner.url
    inner.url = "postgresql://kernelscope@127.0.0.1:1/kernelscope"  # the database is down
    try:
        response = client.get(f"/api/traces/{old}")
        assert response.status_code == 503 and int(response.headers["Retry-After"]) >= 1
        assert client.get(f"/t/{old}").status_code == 503
        done = compile_events(client, "y = 2\n")[-1]["data"]
        assert done["ok"] is True and "store_error" not in done and done["trace_id"]
        assert client.get(f"/api/traces/{done['trace_id']}").status_code == 200  # spooled
        assert client.get("/api/health").status_code == 200
    finally:
        inner.url = url
    assert store.flush(force=True) == 1  # type: ignore[attr-defined]
    assert inner.get(done["trace_id"]) is not None
    assert store.spooled() == []  # type: ignore[attr-defined]


@needs_pg
def test_migrations_run_once_when_everything_starts_at_once() -> None:
    from kernelscope.server.store.postgres import PostgresTraceStore

    for round_ in range(3):
        tag = f"race{os.getpid()}_{round_}_{time.monotonic_ns()}"
        url = postgres_schema_url(tag)
        barrier = threading.Barrier(6)
        errors: list[BaseException] = []

        def start() -> None:
            barrier.wait()
            try:
                PostgresTraceStore(url)
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(exc)

        threads = [threading.Thread(target=start) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        drop_postgres_schema(tag)
        assert errors == []


@needs_redis
@needs_pg
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_redis_restarted_mid_job_loses_nothing_and_the_worker_survives(
    make_app: AppFactory, backend: str, tmp_path: Path
) -> None:
    port = free_port()
    folder = tmp_path / "redis"
    folder.mkdir()

    def redis_server() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis

        assert wait_until(lambda: _pings(redis.Redis(port=port)), 10)
        return proc

    server = redis_server()
    url = f"redis://127.0.0.1:{port}/0"
    app = make_app(QUEUE_URL=url, QUEUE_NAME="restart", JOB_TIMEOUT_S=60)
    ours = {k: app.config[k] for k in default_config()}
    workers = start_rq_workers({**ours, "QUEUE_URL": url, "WARM_POOL": 0}, 1, tmp_path)
    try:
        client = app.test_client()
        job_id = submit(client, "# fake-sleep: 1.0\nx = 1\n")
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.append(
            client.get(f"/api/jobs/{job_id}/events").get_data(as_text=True)))
        reader.start()
        import redis

        conn = redis.Redis(port=port)
        assert wait_until(lambda: conn.xlen(f"ks:restart:job:{job_id}:events") >= 3, 60)
        server.send_signal(signal.SIGKILL)  # Redis dies, and comes back empty 5 s later
        server.wait(10)
        time.sleep(5)
        server = redis_server()
        reader.join(90)
        events = parse_sse(got[0])
        assert events[-1]["stage"] == "done", [e["stage"] for e in events]
        assert [e["seq"] for e in events] == list(range(len(events)))
        assert events[-1]["data"]["ok"] is True
        # The worker reconnected: the next job runs.
        again = compile_events(client, "y = 2\n")
        assert again[-1]["data"]["ok"] is True
        assert all(w.poll() is None for w in workers)
    finally:
        stop_rq_workers(workers)
        server.kill()
        server.wait(10)


def _pings(conn: Any) -> bool:
    try:
        return bool(conn.ping())
    except Exception:  # noqa: BLE001 - not up yet
        return False


@needs_redis
def test_a_killed_worker_restarts_under_its_own_name_at_once(tmp_path: Path) -> None:
    import redis

    conn = redis.Redis.from_url(str(REDIS_URL))
    name = f"w{os.getpid()}-{time.monotonic_ns()}"
    dead = subprocess.Popen(["true"])
    dead.wait()
    # What a worker killed with -9 leaves: its registration, alive for minutes.
    key = f"rq:worker:{name}"
    conn.hset(key, mapping={"hostname": socket.gethostname(), "pid": str(dead.pid),
                            "queues": "fresh", "birth": "2026-12-01T00:00:00Z"})
    conn.expire(key, 420)
    conn.sadd("rq:workers", key)
    config = {"QUEUE_URL": REDIS_URL, "QUEUE_NAME": "fresh", "DATABASE":
              str(tmp_path / "t.sqlite3"), "WARM_POOL": 0, "KERNEL_CACHE": "",
              "SCRATCH_ROOT": str(tmp_path)}
    path = tmp_path / "worker.json"
    path.write_text(json.dumps(config))
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope.server.cli", "worker", "--config", str(path),
         "--name", name,
         "--burst"], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
        timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"active worker named" not in done.stderr
