"""Fixtures for the server tests: apps on a temporary database, and two kinds of worker.

- the fake worker (tests/server/fake_worker.py): the compiler CLI's flags and NDJSON shape,
  fast; it exec()s the snippet, so the sandbox still meets the hostile code;
- the real compiler CLI (`python -m compiler compile`), used by the end-to-end tests and,
  once it exists, by the hostile-snippet corpus.
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

from server import create_app  # noqa: E402 - after the sys.path line above
from server.state import AppState  # noqa: E402 - after the sys.path line above
from server.streams import parse_sse  # noqa: E402 - after the sys.path line above

FAKE_WORKER = [sys.executable, str(HERE / "fake_worker.py")]
FAKE_BACK = [*FAKE_WORKER, "stages"]
REAL_WORKER = [sys.executable, "-m", "compiler", "compile"]
REAL_BACK = [sys.executable, "-m", "compiler", "stages"]
REAL_CLI_PRESENT = (REPO / "compiler" / "__main__.py").exists() or (
    REPO / "compiler" / "cli.py"
).exists()
needs_real_cli = pytest.mark.skipif(
    not REAL_CLI_PRESENT, reason="the compiler CLI (python -m compiler) does not exist yet"
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


@pytest.fixture
def make_app(tmp_path: Path) -> Iterator[AppFactory]:
    """Build apps on tmp_path/traces.sqlite3 (the same file each call: a "restart")."""
    made: list[Flask] = []

    def factory(**overrides: Any) -> Flask:
        config = {
            "DATABASE": str(tmp_path / "db" / "traces.sqlite3"),
            "WORKER_CMD": FAKE_WORKER,
            "BACK_CMD": FAKE_BACK,
            "JOB_TIMEOUT_S": 5,
            "HEARTBEAT_S": 0.5,
            "WORKER_THREADS": 2,
            "SAMPLES_DIR": str(REPO / "samples"),
            "ISOLATION": ISOLATION,
        }
        config.update(overrides)
        app = create_app(config)
        app.config["TESTING"] = True
        made.append(app)
        return app

    yield factory
    for app in made:
        state(app).jobs.shutdown()


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


def compile_events(client: FlaskClient, code: str, **options: Any) -> list[dict[str, Any]]:
    return stream(client, submit(client, code, **options))


def first_error(events: list[dict[str, Any]]) -> dict[str, Any]:
    errors = [e["data"] for e in events if e["stage"] == "error"]
    assert errors, f"no error event in {[e['stage'] for e in events]}"
    return errors[0]


def wait_until(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.1)
    return check()
