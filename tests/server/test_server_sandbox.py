"""Hostile snippets: each one ends in a clear error event, and the server keeps serving.

The corpus runs through the real compiler CLI (the fake worker until the CLI exists: it
exec()s the snippet the same way, so the sandbox meets the same code). The quick cases are
all submitted at once and run two at a time; the ones that must hit the wall clock (an
infinite loop with 200 escaped children, a fork bomb) run alone afterwards. Cases that need
namespaces (network, files outside scratch) are skipped where the host has no bubblewrap;
/api/health says which isolation is active.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest
from flask import Flask
from flask.testing import FlaskClient
from server_support import (
    FAKE_BACK,
    FAKE_WORKER,
    ISOLATION,
    REAL_BACK,
    REAL_CLI_PRESENT,
    REAL_WORKER,
    AppFactory,
    add_relu_code,
    compile_events,
    first_error,
    idle_warm_workers,
    state,
    stream,
    submit,
    wait_until,
)

from kernelscope.server import create_app
from kernelscope.server.jobs.worker import scratch_exceeded

WORKER = REAL_WORKER if REAL_CLI_PRESENT else FAKE_WORKER
# The loop and the fork bomb must outlast the compiler's start (torch import) and then hit
# this; the quick cases get room to spare on a busy machine.
TIMEOUT_S = 30 if REAL_CLI_PRESENT else 5
# The fork bomb's own wall clock, an upper bound (the test cancels the job once the bomb is
# held): under CI's load, torch's import once took most of 30 s and the bomb was stopped
# after 8 forks, before it could reach its limit.
BOMB_TIMEOUT_S = 90 if REAL_CLI_PRESENT else 5
QUICK_TIMEOUT_S = 180
Events = list[dict[str, Any]]


def namespaced(app: Flask) -> bool:
    return state(app).settings.isolation.mode == "bubblewrap"


def nproc_enforced(app: Flask) -> bool:
    """RLIMIT_NPROC limits everyone but root: the worker must not run as root."""
    return os.geteuid() != 0 or state(app).settings.isolation.uid is not None


def processes(match: Callable[[str], bool]) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if match(cmd):
            found.append(int(entry.name))
    return found


# Markers unique to this test run: other servers on the machine run sandboxes too.
SLEEP_MARK = f"1000.{os.getpid()}"
BOMB_MARK = f"forkbomb-{os.getpid()}"
SCRATCH_MARK = f"ks-hostile-{os.getpid()}"


def in_sandbox(cmd: str) -> bool:
    return any(marker in cmd for marker in (SCRATCH_MARK, SLEEP_MARK, BOMB_MARK))


def job_processes(*apps: Flask) -> list[int]:
    """Sandboxed processes left over from jobs: idle warm workers (no job yet) do not count."""
    found = processes(in_sandbox)
    idle = idle_warm_workers(*apps)  # after: a worker started in between is not in `found`
    return [pid for pid in found if pid not in idle]


def describe(pids: list[int]) -> str:
    """What the leftover processes are (for a failing assertion's message)."""
    out = []
    for pid in pids[:8]:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200]
            out.append(f"{pid} {stat[0]} pgid={stat[2]} {cmd.decode(errors='replace')}")
        except OSError:
            continue
    return f"{len(pids)} left: " + "; ".join(out)


def quick_cases(app: Flask, secret: Path, port: int) -> dict[str, str]:
    """name -> snippet, for every case this host can check."""
    database = str(state(app).store.inner.path)  # type: ignore[attr-defined]
    cases = {
        "syntax": "import torch\ndef f(x:\n    return x\n",
        "exception": "raise RuntimeError('kaboom from the snippet')\n",
        "memory": "hog = bytearray(1 << 40)\n",
        "segfault": "import ctypes\nctypes.string_at(0)\n",
        "output": "import os\nwhile True:\n    os.write(1, b'x' * 65536)\n",
        "bigfile": "open('big.bin', 'wb').write(b'x' * (64 << 20))\n",
    }
    other_user = state(app).settings.isolation.uid is not None
    if namespaced(app) or other_user or os.geteuid() != 0:
        cases["shadow"] = "print(open('/etc/shadow').read())\n"
    if namespaced(app) or other_user:  # the server's own user could read its database
        cases["database"] = f"open({database!r}, 'rb').read()\n"
    if namespaced(app):
        cases["network"] = "import socket\nsocket.create_connection(('10.255.255.1', 80), 5)\n"
        cases["loopback"] = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), 5)\n"
        cases["outside"] = f"import os\nprint(open({str(secret)!r}).read())\n"
        home_file = next((f for f in Path.home().iterdir() if f.is_file()), None)
        if home_file is not None:
            cases["home"] = f"print(open({str(home_file)!r}).read())\n"
        if shutil.which("curl"):
            cases["curl"] = (
                "import os\nassert os.system('curl -sS -m 5 http://10.255.255.1/') == 0\n"
            )
    return cases


@pytest.fixture(scope="module")
def listener() -> Iterator[socket.socket]:
    """A port on the host's loopback that no sandboxed snippet may reach."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        sock.settimeout(0.1)
        yield sock


def hostile_config(root: Path, timeout_s: float) -> dict[str, Any]:
    scratch = root / SCRATCH_MARK
    scratch.mkdir(exist_ok=True)
    return {
        "SCRATCH_ROOT": str(scratch),
        "CLIENT_JOBS": 0,  # every case at once, from one test client
        "DATABASE": str(root / "db" / "traces.sqlite3"),
        "WORKER_CMD": WORKER,
        "BACK_CMD": REAL_BACK if REAL_CLI_PRESENT else FAKE_BACK,
        "JOB_TIMEOUT_S": timeout_s,
        "MAX_JOBS": 2,
        "QUEUE_SIZE": 32,
        "FILE_SIZE_LIMIT_MB": 32,
        "PROCESS_LIMIT": 256,
        "WORKER_THREADS": 1,
        "HEARTBEAT_S": 1.0,
        "ISOLATION": ISOLATION,
        "KERNEL_CACHE": str(root / "kernels"),
    }


@pytest.fixture(scope="module")
def hostile_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Flask]:
    app = create_app(hostile_config(tmp_path_factory.mktemp("hostile"), QUICK_TIMEOUT_S))
    yield app
    state(app).jobs.shutdown()


@pytest.fixture(scope="module")
def slow_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlaskClient]:
    """A second server with a short wall clock, for the cases that must time out."""
    app = create_app(hostile_config(tmp_path_factory.mktemp("slow"), TIMEOUT_S))
    client = app.test_client()
    yield client
    assert client.get("/api/health").status_code == 200, "the server stopped serving"
    state(app).jobs.shutdown()


@pytest.fixture(scope="module")
def jobs(
    hostile_app: Flask, listener: socket.socket, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """Submit every quick case at once; tests then read their own job's stream."""
    secret = tmp_path_factory.mktemp("outside") / "secret.txt"
    secret.write_text("the server's secret")
    client = hostile_app.test_client()
    submitted = {}
    for name, code in quick_cases(hostile_app, secret, listener.getsockname()[1]).items():
        response = client.post("/api/compile", json={"code": code})
        assert response.status_code == 202, response.get_json()
        submitted[name] = response.get_json()["job_id"]
    return submitted


@pytest.fixture
def client(hostile_app: Flask) -> Iterator[FlaskClient]:
    client = hostile_app.test_client()
    yield client
    assert client.get("/api/health").status_code == 200, "the server stopped serving"


def outcome(client: FlaskClient, jobs: dict[str, str], name: str) -> dict[str, Any]:
    """The first error of a quick case (skipped where the host cannot check it)."""
    if name not in jobs:
        pytest.skip(f"{name}: this host's isolation cannot stop it (see /api/health)")
    events = stream(client, jobs[name])
    return finished_with_error(events)


def finished_with_error(events: Events) -> dict[str, Any]:
    assert events[-1]["stage"] == "done" and events[-1]["data"]["ok"] is False
    assert events[-1]["data"]["trace_id"]
    return first_error(events)


def test_syntax_error(client: FlaskClient, jobs: dict[str, str]) -> None:
    assert outcome(client, jobs, "syntax")["kind"] == "syntax"


def test_exception(client: FlaskClient, jobs: dict[str, str]) -> None:
    error = outcome(client, jobs, "exception")
    assert error["kind"] == "exception" and "kaboom" in error["message"]


def test_memory_bomb(client: FlaskClient, jobs: dict[str, str]) -> None:
    error = outcome(client, jobs, "memory")
    assert error["kind"] == "memory" and "memory limit" in error["message"]


def test_segfault(client: FlaskClient, jobs: dict[str, str]) -> None:
    error = outcome(client, jobs, "segfault")
    assert error["kind"] == "killed" and "SIGSEGV" in error["message"]


def test_output_flood_is_cut(client: FlaskClient, jobs: dict[str, str]) -> None:
    error = outcome(client, jobs, "output")
    assert error["kind"] == "sandbox" and "MiB of output" in error["message"]


def test_huge_file_hits_the_file_size_limit(client: FlaskClient, jobs: dict[str, str]) -> None:
    error = outcome(client, jobs, "bigfile")
    assert "File too large" in error["message"] or "larger than 32 MiB" in error["message"]


def test_etc_shadow_is_unreadable(client: FlaskClient, jobs: dict[str, str]) -> None:
    error = outcome(client, jobs, "shadow")
    assert error["kind"] == "exception" and "/etc/shadow" in error["message"]


def test_database_is_out_of_reach(
    client: FlaskClient, jobs: dict[str, str], hostile_app: Flask
) -> None:
    error = outcome(client, jobs, "database")
    assert "FileNotFoundError" in error["message"] or "PermissionError" in error["message"]
    assert state(hostile_app).store.count() > 0  # and the store still works


def test_no_network(client: FlaskClient, jobs: dict[str, str]) -> None:
    assert "Network is unreachable" in outcome(client, jobs, "network")["message"]


def test_host_loopback_is_not_reachable(
    client: FlaskClient, jobs: dict[str, str], listener: socket.socket
) -> None:
    error = outcome(client, jobs, "loopback")
    assert "refused" in error["message"] or "unreachable" in error["message"]
    with pytest.raises(TimeoutError):
        listener.accept()


def test_os_system_curl_fails(client: FlaskClient, jobs: dict[str, str]) -> None:
    error = outcome(client, jobs, "curl")
    assert error["kind"] == "exception" and "AssertionError" in error["message"]


def test_files_outside_scratch_are_invisible(client: FlaskClient, jobs: dict[str, str]) -> None:
    if "outside" not in jobs:
        pytest.skip("without namespaces the host's files are visible")
    for name in ("outside", "home"):
        if name not in jobs:
            continue  # a home directory with no plain file in it
        error = outcome(client, jobs, name)
        assert "FileNotFoundError" in error["message"] or "PermissionError" in error["message"]


class Watch:
    """Counts matching processes in the background: proof a hostile snippet really ran."""

    def __init__(self, match: Callable[[str], bool]) -> None:
        self.match, self.most, self._stop = match, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self.most = max(self.most, len(processes(self.match)))

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


FORK_BOMB = (
    "import subprocess, sys, time\n"
    f"bomb = '# {BOMB_MARK}\\nimport os\\nwhile True:\\n    try:\\n        os.fork()\\n'\n"
    "bomb += '    except OSError:\\n        pass\\n'\n"
    "subprocess.Popen([sys.executable, '-c', bomb])\n"
    "time.sleep(1000)\n"
)


def test_infinite_loop_with_escaped_children_is_killed(
    slow_client: FlaskClient, hostile_app: Flask
) -> None:
    code = (
        "import subprocess\n"
        "for _ in range(200):\n"
        f"    subprocess.Popen(['/bin/sleep', '{SLEEP_MARK}'], start_new_session=True)\n"
        "while True:\n"
        "    pass\n"
    )
    with Watch(lambda cmd: SLEEP_MARK in cmd) as watch:
        error = finished_with_error(compile_events(slow_client, code))
    assert error["kind"] == "timeout" and f"longer than {TIMEOUT_S} s" in error["message"]
    assert watch.most >= 50, "the snippet never started its children"
    apps = (slow_client.application, hostile_app)  # both keep warm workers in this root
    assert wait_until(lambda: not job_processes(*apps), timeout=15), describe(
        job_processes(*apps)
    )


def test_fork_bomb(slow_client: FlaskClient, hostile_app: Flask, tmp_path: Path) -> None:
    if not nproc_enforced(hostile_app):
        pytest.skip("the worker runs as root here, so RLIMIT_NPROC cannot bound a fork bomb")
    # The snippet starts a small Python that forks quickly, and waits (a worker that closes
    # its event channel, e.g. by exec(), is stopped at once). 5 s after the bomb passed 20
    # processes (it reaches its limit within them) the job is cancelled: its processes
    # share the sandbox uid, and so its process limit, with every other test's sandbox
    # (a 90 s bomb once failed another module's sandbox probe with EAGAIN).
    app = create_app(hostile_config(tmp_path, BOMB_TIMEOUT_S))
    client = app.test_client()
    try:
        with Watch(lambda cmd: BOMB_MARK in cmd) as watch:
            job_id = submit(client, FORK_BOMB)
            if wait_until(lambda: watch.most > 20, timeout=BOMB_TIMEOUT_S):
                time.sleep(5)
            client.post(f"/api/jobs/{job_id}/cancel")
            error = finished_with_error(stream(client, job_id))
        assert error["kind"] in ("timeout", "exception", "killed", "cancelled"), error
        assert 20 < watch.most <= 256, watch.most  # it forked, and RLIMIT_NPROC held
        apps = (app, slow_client.application, hostile_app)  # their warm workers share the root
        assert wait_until(lambda: not job_processes(*apps), timeout=30), describe(
            job_processes(*apps)
        )
    finally:
        state(app).jobs.shutdown()


def test_a_normal_compile_works_afterwards(client: FlaskClient) -> None:
    code = add_relu_code() if REAL_CLI_PRESENT else "x = 1 + 1\n"
    events = compile_events(client, code, device="cpu", backend="cpp")
    assert "error" not in [e["stage"] for e in events], first_error(events)
    assert events[-1]["data"]["ok"] is True


def test_scratch_budget_counts_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 20000)
    assert scratch_exceeded(tmp_path, 10000)
    assert not scratch_exceeded(tmp_path, 1 << 20)


def test_rlimits_only_mode_kills_children_that_left_the_group(make_app: AppFactory) -> None:
    client = make_app(ISOLATION="rlimits-only", WORKER_CMD=FAKE_WORKER, JOB_TIMEOUT_S=3)
    client = client.test_client()
    assert client.get("/api/health").get_json()["isolation"] == "rlimits-only"
    code = (
        "import os, time\n"
        "for _ in range(20):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        f"            os.execv('/bin/sleep', ['sleep', '{SLEEP_MARK}'])\n"
        "        os._exit(0)\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    try:
        with Watch(lambda cmd: SLEEP_MARK in cmd) as watch:
            error = finished_with_error(compile_events(client, code))
        assert error["kind"] == "timeout" and watch.most == 20
        assert wait_until(lambda: not processes(lambda cmd: SLEEP_MARK in cmd), timeout=10)
    finally:
        for pid in processes(lambda cmd: SLEEP_MARK in cmd):
            os.kill(pid, 9)


def test_extra_read_only_paths_under_tmp_stay_visible(make_app: AppFactory, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("visible")
    shared.chmod(0o755)
    tmp_path.chmod(0o755)
    app = make_app(EXTRA_RO_PATHS=[str(shared)])
    if not namespaced(app):
        pytest.skip("needs bubblewrap")
    data = shared / "data.txt"
    code = (
        f"text = open({str(data)!r}).read()\n"
        "try:\n"
        f"    open({str(data)!r}, 'w')\n"
        "except OSError as exc:\n"
        "    raise SystemExit(f'{text}; write: {exc.strerror}')\n"
    )
    error = finished_with_error(compile_events(app.test_client(), code))
    assert "visible; write: Read-only file system" in error["message"]
