"""Hostile snippets: each one ends in a clear error event, and the server keeps serving.

The corpus runs through the real compiler CLI when it exists (the fake worker otherwise:
it exec()s the snippet the same way, so the sandbox meets the same code). Cases that need
namespaces (network, files outside scratch, an unbounded fork bomb) are skipped where the
host gives no bubblewrap; /api/health says which isolation is active.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    FAKE_WORKER,
    REAL_CLI_PRESENT,
    REAL_WORKER,
    add_relu_code,
    compile_events,
    first_error,
    state,
    wait_until,
)
from flask import Flask
from flask.testing import FlaskClient

from server import create_app
from server.worker import scratch_exceeded

WORKER = REAL_WORKER if REAL_CLI_PRESENT else FAKE_WORKER
TIMEOUT_S = 20 if REAL_CLI_PRESENT else 5


@pytest.fixture(scope="module")
def hostile_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flask]:
    root = tmp_path_factory.mktemp("hostile")
    app = create_app(
        {
            "DATABASE": str(root / "db" / "traces.sqlite3"),
            "WORKER_CMD": WORKER,
            "JOB_TIMEOUT_S": TIMEOUT_S,
            "MAX_JOBS": 1,
            "FILE_SIZE_LIMIT_MB": 32,
            "PROCESS_LIMIT": 256,
            "WORKER_THREADS": 2,
            "HEARTBEAT_S": 1.0,
        }
    )
    yield app
    state(app).jobs.shutdown()


@pytest.fixture
def client(hostile_app: Flask) -> Iterator[FlaskClient]:
    client = hostile_app.test_client()
    yield client
    assert client.get("/api/health").status_code == 200, "the server stopped serving"


def namespaced(app: Flask) -> bool:
    return state(app).settings.isolation.mode == "bubblewrap"


def nproc_enforced(app: Flask) -> bool:
    """RLIMIT_NPROC limits everyone but root: the worker must not run as root."""
    return os.geteuid() != 0 or state(app).settings.isolation.uid is not None


def sandbox_processes() -> list[str]:
    """Command lines of processes left from any job (bwrap or worker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "kernelscope-job-" in cmd or "/scratch/snippet.py" in cmd or "1000.4242" in cmd:
            found.append(cmd)
    return found


def run(client: FlaskClient, code: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    events = compile_events(client, code)
    assert events[-1]["stage"] == "done" and events[-1]["data"]["ok"] is False
    assert events[-1]["data"]["trace_id"]
    return events, first_error(events)


def test_syntax_error(client: FlaskClient) -> None:
    _, error = run(client, "import torch\ndef f(x:\n    return x\n")
    assert error["kind"] == "syntax"


def test_exception(client: FlaskClient) -> None:
    _, error = run(client, "raise RuntimeError('kaboom from the snippet')\n")
    assert error["kind"] == "exception" and "kaboom" in error["message"]


def test_infinite_loop_times_out(client: FlaskClient) -> None:
    _, error = run(client, "while True:\n    pass\n")
    assert error["kind"] == "timeout"
    assert f"longer than {TIMEOUT_S} s" in error["message"]
    assert wait_until(lambda: not sandbox_processes()), sandbox_processes()


def test_memory_bomb(client: FlaskClient) -> None:
    _, error = run(client, "hog = bytearray(1 << 40)\n")
    assert error["kind"] == "memory" and "memory limit" in error["message"]


def test_segfault(client: FlaskClient) -> None:
    _, error = run(client, "import ctypes\nctypes.string_at(0)\n")
    assert error["kind"] == "killed" and "SIGSEGV" in error["message"]


def test_two_hundred_children_are_all_killed(client: FlaskClient) -> None:
    code = (
        "import os, time\n"
        "for _ in range(200):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        os.execv('/bin/sleep', ['sleep', '1000.4242'])\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    _, error = run(client, code)
    assert error["kind"] == "timeout"
    assert wait_until(lambda: not sandbox_processes(), timeout=15), sandbox_processes()[:5]


def test_fork_bomb(client: FlaskClient, hostile_app: Flask) -> None:
    if not nproc_enforced(hostile_app):
        pytest.skip("the worker runs as root here, so RLIMIT_NPROC cannot bound a fork bomb")
    code = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    _, error = run(client, code)
    assert error["kind"] in ("timeout", "exception", "killed"), error
    assert wait_until(lambda: not sandbox_processes(), timeout=30), sandbox_processes()[:5]


def test_output_flood_is_cut(client: FlaskClient) -> None:
    _, error = run(client, "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n")
    assert error["kind"] == "sandbox" and "MiB of output" in error["message"]


def test_huge_file_hits_the_file_size_limit(client: FlaskClient) -> None:
    _, error = run(client, "open('big.bin', 'wb').write(b'x' * (64 << 20))\n")
    assert "File too large" in error["message"] or "larger than 32 MiB" in error["message"]


def test_no_network(client: FlaskClient, hostile_app: Flask) -> None:
    if not namespaced(hostile_app):
        pytest.skip("no network namespace without bubblewrap")
    code = "import socket\nsocket.create_connection(('10.255.255.1', 80), timeout=5)\n"
    _, error = run(client, code)
    assert "Network is unreachable" in error["message"]


def test_host_loopback_is_not_reachable(client: FlaskClient, hostile_app: Flask) -> None:
    if not namespaced(hostile_app):
        pytest.skip("no network namespace without bubblewrap")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.1)
        port = listener.getsockname()[1]
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        _, error = run(client, code)
        assert error["kind"] == "exception"
        assert "refused" in error["message"] or "unreachable" in error["message"]
        with pytest.raises(TimeoutError):
            listener.accept()


def test_os_system_curl_fails(client: FlaskClient, hostile_app: Flask) -> None:
    if not namespaced(hostile_app):
        pytest.skip("no network namespace without bubblewrap")
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    code = "import os\nstatus = os.system('curl -sS -m 5 http://10.255.255.1/')\nassert status == 0, status\n"
    _, error = run(client, code)
    assert error["kind"] == "exception" and "AssertionError" in error["message"]


def test_etc_shadow_is_unreadable(client: FlaskClient) -> None:
    _, error = run(client, "print(open('/etc/shadow').read())\n")
    assert error["kind"] == "exception" and "/etc/shadow" in error["message"]


def test_database_is_out_of_reach(client: FlaskClient, hostile_app: Flask) -> None:
    if not (namespaced(hostile_app) or nproc_enforced(hostile_app)):
        pytest.skip("without bubblewrap a root worker can read any file")
    database = str(state(hostile_app).store.path)
    code = (
        f"data = open({database!r}, 'rb').read()\nraise SystemExit(f'read {{len(data)}} bytes')\n"
    )
    _, error = run(client, code)
    assert "FileNotFoundError" in error["message"] or "PermissionError" in error["message"]
    assert state(hostile_app).store.count() > 0  # and it is intact


def test_files_outside_scratch_are_invisible(
    client: FlaskClient, hostile_app: Flask, tmp_path: Path
) -> None:
    if not namespaced(hostile_app):
        pytest.skip("without bubblewrap the host's files are visible")
    secret = tmp_path / "secret.txt"
    secret.write_text("the server's secret")
    home = os.path.expanduser("~")
    code = f"import os\nprint(os.listdir({home!r}))\nprint(open({str(secret)!r}).read())\n"
    _, error = run(client, code)
    assert "FileNotFoundError" in error["message"] or "PermissionError" in error["message"]


def test_scratch_budget_counts_bytes_and_files(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 20000)
    assert scratch_exceeded(tmp_path, 10000)
    assert not scratch_exceeded(tmp_path, 1 << 20)


@pytest.mark.skipif(not REAL_CLI_PRESENT, reason="the compiler CLI does not exist yet")
def test_a_normal_compile_works_afterwards(client: FlaskClient) -> None:
    events = compile_events(client, add_relu_code(), device="cpu", backend="cpp")
    stages = [e["stage"] for e in events]
    assert "error" not in stages, first_error(events)
    assert events[-1]["data"]["ok"] is True


def test_a_normal_snippet_works_afterwards(client: FlaskClient) -> None:
    if REAL_CLI_PRESENT:
        pytest.skip("covered by test_a_normal_compile_works_afterwards")
    events = compile_events(client, "x = 1 + 1\n")
    assert events[-1]["data"]["ok"] is True


def test_rlimits_only_mode_still_kills_children_that_left_the_group(
    make_app: Any,
) -> None:
    client = make_app(ISOLATION="rlimits-only", WORKER_CMD=FAKE_WORKER, JOB_TIMEOUT_S=3)
    client = client.test_client()
    assert client.get("/api/health").get_json()["isolation"] == "rlimits-only"
    code = (
        "import os, time\n"
        "for _ in range(20):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            os.execv('/bin/sleep', ['sleep', '1000.4242'])\n"
        "        os._exit(0)\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    try:
        _, error = run(client, code)
        assert error["kind"] == "timeout"
        assert wait_until(lambda: not sandbox_processes(), timeout=10), sandbox_processes()[:3]
    finally:
        for pid, cmd in stray_pids():
            os.kill(pid, 9)


def stray_pids() -> list[tuple[int, str]]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and "1000.4242" in cmd:
            found.append((int(entry.name), cmd))
    return found
