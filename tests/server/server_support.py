"""Fixtures for the server tests: apps on a temporary database, and two kinds of worker.

- the fake worker (tests/server/fake_worker.py): the compiler CLI's flags and NDJSON shape,
  fast; it exec()s the snippet, so the sandbox still meets the hostile code;
- the real compiler CLI (`python -m kernelscope.compiler compile`), used by the end-to-end tests
  and,
  once it exists, by the hostile-snippet corpus.

The tests run side by side under pytest-xdist, each with servers of its own: a test that
looks for or signals processes finds only its own (a marker of its own in the command line,
or descent from this process, where its server runs), never every worker of the checkout
(test_server_crash.py killed the job of the test beside it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(REPO) not in sys.path:  # `pytest` run without the package installed
    sys.path.insert(0, str(REPO))

from kernelscope.server import create_app  # noqa: E402 - after the sys.path line above
from kernelscope.server.web.appstate import AppState  # noqa: E402 - after the sys.path line above
from kernelscope.server.web.streams import parse_sse  # noqa: E402 - after the sys.path line above

FAKE_WORKER = [sys.executable, str(HERE / "fake_worker.py")]
FAKE_BACK = [*FAKE_WORKER, "stages"]
REAL_WORKER = [sys.executable, "-m", "kernelscope.compiler", "compile"]
REAL_BACK = [sys.executable, "-m", "kernelscope.compiler", "stages"]
REAL_CLI_PRESENT = (REPO / "compiler" / "__main__.py").exists() or (
    REPO / "compiler" / "cli.py"
).exists()
needs_real_cli = pytest.mark.skipif(
    not REAL_CLI_PRESENT,
    reason="the compiler CLI (python -m kernelscope.compiler) does not exist yet"
)

ADD_RELU_FALLBACK = '''"""add + relu: two pointwise ops that fuse into one kernel."""
import torch


def add_relu(x, y):
    return torch.relu(x + y)


x = torch.randn(1024)
y = torch.randn(1024)
'''


def add_relu_code() -> str:
    sample = REPO / "samples" / "add_relu.py"
    return sample.read_text() if sample.exists() else ADD_RELU_FALLBACK


# KERNELSCOPE_TEST_ISOLATION=rlimits-only runs the suite as on a host without bubblewrap.
ISOLATION = os.environ.get("KERNELSCOPE_TEST_ISOLATION", "auto")
AppFactory = Callable[..., Flask]


# The back-ends the API and streaming tests run against (test modules that set
# `ALL_BACKENDS = True` run every test on each; conftest.py parametrizes them):
# - embedded: local supervisor threads and SQLite (the defaults);
# - postgres: local supervisor threads, traces in PostgreSQL;
# - redis: jobs on RQ workers (two `kernelscope worker` processes) through Redis, traces in
#   PostgreSQL.
# The services come from KERNELSCOPE_TEST_REDIS / KERNELSCOPE_TEST_POSTGRES (`eval "$(bash
# scripts/services.sh start)"`); without them those cases skip, saying so.
BACKENDS = ("embedded", "postgres", "redis")
REDIS_URL = os.environ.get("KERNELSCOPE_TEST_REDIS")
POSTGRES_URL = os.environ.get("KERNELSCOPE_TEST_POSTGRES")


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    name: str = getattr(request, "param", "embedded")
    missing = []
    if name in ("postgres", "redis") and not POSTGRES_URL:
        missing.append("KERNELSCOPE_TEST_POSTGRES")
    if name == "redis" and not REDIS_URL:
        missing.append("KERNELSCOPE_TEST_REDIS")
    if missing:
        why = f"{' and '.join(missing)} not set (eval \"$(bash scripts/services.sh start)\")"
        if os.environ.get("KERNELSCOPE_REQUIRE_SERVICES") == "1":  # CI: never skip these
            pytest.fail(why)
        pytest.skip(why)
    if request.node.get_closest_marker("embedded_only") and name != "embedded":
        pytest.skip("looks inside the local job manager or the SQLite store")
    return name


def postgres_schema_url(name: str) -> str:
    """A fresh schema in the test database, as a URL whose connections use it."""
    import psycopg

    assert POSTGRES_URL
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {name}")
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}options=-csearch_path%3D{name}"


def drop_postgres_schema(name: str) -> None:
    import psycopg

    assert POSTGRES_URL
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def start_rq_workers(config: dict[str, Any], count: int, folder: Path) -> list[Any]:
    """`kernelscope worker` processes for this app's queue, with the app's configuration."""
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"worker-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "kernelscope.server.cli", "worker", "--config", str(path)]
    return [
        subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        for _ in range(count)
    ]


def stop_rq_workers(workers: list[Any]) -> None:
    import signal

    for proc in workers:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in workers:
        try:
            proc.wait(10)
        except Exception:  # noqa: BLE001 - a worker that ignores SIGTERM is killed
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@pytest.fixture
def make_app(tmp_path: Path, backend: str) -> Iterator[AppFactory]:
    """Build apps on tmp_path/traces.sqlite3 (the same file each call: a "restart"), or on
    the test's own PostgreSQL schema and Redis queue for the other back-ends."""
    made: list[Flask] = []
    workers: list[Any] = []
    tag = f"t{os.getpid()}_{time.monotonic_ns()}"
    database = str(tmp_path / "db" / "traces.sqlite3")
    if backend in ("postgres", "redis"):
        database = postgres_schema_url(tag)

    def factory(**overrides: Any) -> Flask:
        config = {
            "DATABASE": database,
            "WORKER_CMD": FAKE_WORKER,
            "BACK_CMD": FAKE_BACK,
            "JOB_TIMEOUT_S": 5,
            "HEARTBEAT_S": 0.5,
            "WORKER_THREADS": 2,
            "SAMPLES_DIR": str(REPO / "samples"),
            "ISOLATION": ISOLATION,
            # Warm workers for the fake worker: nothing to import, nothing to warm up.
            "WARM_IMPORTS": [],
            "WARM_UP": False,
            "KERNEL_CACHE": str(tmp_path / "kernels"),
            # Many tests submit a burst from one test client; the quota has its own tests.
            "CLIENT_JOBS": 0,
            # The fake worker has no warm pool (every job is cold): the stream tests read
            # the halves' own events; the server's early `source` has its own tests.
            "EARLY_SOURCE": False,
            # The server's own `progress` for a quiet worker would land anywhere in streams
            # these tests compare; test_server_quiet.py turns it on.
            "QUIET_S": 0,
        }
        if backend != "embedded" and "DATABASE" not in overrides:
            config["DATABASE"] = database
        config.update(overrides)
        if backend == "redis":
            config.update(QUEUE_URL=REDIS_URL, QUEUE_NAME=tag)
            count = int(config.get("MAX_JOBS", 2))
            workers.extend(start_rq_workers(config, count, tmp_path / "workers"))
        app = create_app(config)
        app.config["TESTING"] = True
        made.append(app)
        return app

    yield factory
    for app in made:
        state(app).jobs.shutdown()
    stop_rq_workers(workers)
    if backend in ("postgres", "redis"):
        drop_postgres_schema(tag)


@pytest.fixture
def app(make_app: AppFactory) -> Flask:
    return make_app()


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def state(app: Flask) -> AppState:
    found: AppState = app.extensions["kernelscope"]
    return found


def submit(client: FlaskClient, code: str, **options: Any) -> str:
    response = client.post("/api/compile", json={"code": code, "options": options})
    assert response.status_code == 202, response.get_json()
    job_id: str = response.get_json()["job_id"]
    return job_id


def stream(client: FlaskClient, job_id: str, fmt: str = "sse") -> list[dict[str, Any]]:
    """Read a job's whole event stream (SSE or NDJSON) and return its events."""
    query = "?format=ndjson" if fmt == "ndjson" else ""
    response = client.get(f"/api/jobs/{job_id}/events{query}")
    assert response.status_code == 200
    text = response.get_data(as_text=True)
    if fmt == "ndjson":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return parse_sse(text)


def stage_names(events: list[dict[str, Any]]) -> list[str]:
    """The events' stages, without the heartbeats a long stage sends (`progress`: how many
    come depends on how loaded the host is, not on what was compiled)."""
    return [e["stage"] for e in events if e["stage"] != "progress"]


def compile_events(client: FlaskClient, code: str, **options: Any) -> list[dict[str, Any]]:
    return stream(client, submit(client, code, **options))


def first_error(events: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [e["data"] for e in events if e["stage"] == "error"]
    assert errors, f"no error event in {[e['stage'] for e in events]}"
    return errors[0]


def idle_warm_workers(*apps: Flask) -> set[int]:
    """Pids of every process in the process group of a warm worker of these apps that no
    job has taken yet."""
    pools = [state(app).jobs.pool for app in apps]
    groups = {g for pool in pools if pool is not None for g in pool.idle_groups()}
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[2]) in groups:
                found.add(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return check()


def relay_bytes(relay: Any, body: bytes, wait_s: float) -> Any:
    """Run a server/jobs/relay.py `Relay` on a pipe that a thread fills with `body` (what a
    worker writes) and closes; its Outcome."""
    import threading

    read, write = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write, body), os.close(write)))
    writer.start()
    try:
        return relay.run(read, None, time.monotonic() + wait_s)
    finally:
        os.close(read)
        writer.join(wait_s / 4)


def down_store(path: Path) -> Any:
    """A SQLite trace store whose writes raise StoreUnavailable while its `down` is True (it
    starts down), as a PostgreSQL server that stopped: what the spooling store is for."""
    from kernelscope.server.store.rows import StoreUnavailable
    from kernelscope.server.store.sqlite import TraceStore

    class Down(TraceStore):
        down = True

        def put_prepared(self, trace: Any) -> str:
            if self.down:
                raise StoreUnavailable("down")
            return super().put_prepared(trace)

        def add_follow_up(self, ident: str, event: dict[str, Any]) -> None:
            if self.down:
                raise StoreUnavailable("down")
            super().add_follow_up(ident, event)

    return Down(path)
