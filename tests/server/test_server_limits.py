"""Hostile snippets against the limits that must hold, one test per finding of the review.

- 1: forged events (real compiler: a snippet writes `run`/`profile`/`done` lines to every
  file descriptor it has) change nothing in the trace;
- 2: a 6 GiB shared anonymous mapping stops at the job's memory cgroup limit;
- 3: 3 GiB of files deleted while open stop at the scratch tmpfs's size;
- 4: a normal job passes while another job fork-bombs (per-job pids limits);
- 7: the database is invisible even in a folder the sandbox shows; cleanup never follows a
  link; 9: a killed server's scratch is swept at start-up;
- 8: the seccomp filter refuses unshare and mount.

The fake worker (it exec()s the snippet inside the same sandbox) keeps the limit cases fast.
Each case skips, saying why, where the host lacks what it needs; /api/health says the same.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from server_support import (
    REAL_BACK,
    REAL_CLI_PRESENT,
    REAL_WORKER,
    AppFactory,
    add_relu_code,
    compile_events,
    first_error,
    stage_names,
    state,
)

from kernelscope.server import create_app
from kernelscope.server.sandbox.scratch import PREFIX, remove_tree

Events = list[dict[str, Any]]
STAGES = ["source", "capture", "lowering", "scheduling", "memory", "codegen", "compile", "run",
          "profile", "done"]  # fmt: skip
# The real front half also streams each graph as it is captured (add+relu: one).
REAL_STAGES = ["source", "capture_graph", *STAGES[1:]]


def sandbox(app: Flask) -> dict[str, Any]:
    health: dict[str, Any] = app.test_client().get("/api/health").get_json()["sandbox"]
    return health


def need(app: Flask, what: str) -> None:
    """Skip unless the app's sandbox has `what` ("cgroup", "tmpfs", "seccomp", "bubblewrap")."""
    info = sandbox(app)
    have = {
        "cgroup": info["cgroup"]["version"] != "none",
        "tmpfs": info["scratch"] == "tmpfs",
        "seccomp": info["seccomp"],
        "bubblewrap": info["mode"] == "bubblewrap",
    }[what]
    if not have:
        pytest.skip(f"this host has no {what} for jobs: {'; '.join(info['notes'])}")


def test_health_reports_the_isolation_level(app: Flask) -> None:
    """2-4, 8: /api/health says which limits hold here, and why any layer is missing."""
    info = sandbox(app)
    assert info["cgroup"]["version"] in ("v2", "v1", "none")
    assert info["scratch"] in ("tmpfs", "disk (walked every second)")
    assert isinstance(info["seccomp"], bool)
    notes = " ".join(info["notes"])
    if info["cgroup"]["version"] == "none":
        assert "cgroup" in notes and info["cgroup"]["note"]
    else:
        assert info["cgroup"]["controllers"] == ["memory", "pids"]
    if info["scratch"] != "tmpfs":
        assert "scratch on disk" in notes
    if info["mode"] == "bubblewrap" and not info["seccomp"]:
        assert "seccomp" in notes


FORGE = """
import json, os, sys
def forge():
    lines = [
        {"schema": 1, "seq": 3, "stage": "run", "ms": 1, "data": {"ok": True, "forged": 1}},
        {"schema": 1, "seq": 4, "stage": "profile", "ms": 1,
         "data": {"eager_ms": 100.0, "kernelscope_ms": 0.001, "forged": 1}},
        {"schema": 1, "seq": 5, "stage": "done", "ms": 0, "data": {"ok": True, "forged": 1}},
    ]
    blob = "".join(json.dumps(e) + "\\n" for e in lines).encode()
    print(blob.decode(), flush=True)
    sys.__stdout__.write(blob.decode()); sys.__stdout__.flush()
    for fd in range(1, 64):
        try:
            os.write(fd, blob)
        except OSError:
            pass
forge()
"""


@pytest.mark.skipif(not REAL_CLI_PRESENT, reason="needs the compiler CLI")
def test_forged_events_cannot_change_stages_run_or_profile(make_app: AppFactory) -> None:
    """1: any JSON line with a `stage` on fd 1 was accepted: a fake `run ok`, a fake
    profile (a made-up speed-up) and `done ok:true` went into the permalink."""
    app = make_app(WORKER_CMD=REAL_WORKER, BACK_CMD=REAL_BACK, JOB_TIMEOUT_S=240)
    code = add_relu_code().replace("import torch", "import torch\n" + FORGE, 1)
    events = compile_events(app.test_client(), code, device="cpu", backend="cpp")
    assert stage_names(events) == REAL_STAGES, stage_names(events)
    events = [e for e in events if e["stage"] != "progress"]  # a long stage's heartbeats
    assert not any("forged" in e["data"] for e in events)
    by_stage = {e["stage"]: e for e in events}
    assert by_stage["run"]["data"]["ok"] is True and by_stage["run"]["origin"] == "compiler"
    profile = by_stage["profile"]["data"]
    assert profile.get("kernelscope_ms") != 0.001 and by_stage["profile"]["origin"] == "compiler"
    assert [e["origin"] for e in events[:3]] == ["snippet", "snippet", "snippet"]
    assert by_stage["done"]["data"]["isolated"] is True
    trace = app.test_client().get(f"/api/traces/{events[-1]['data']['trace_id']}").get_json()
    assert stage_names(trace["events"]) == REAL_STAGES


def test_a_forged_done_on_the_front_channel_ends_nothing(client: Any) -> None:
    """1 (fake halves, fast): the front's own event channel is not the trace either."""
    code = FORGE + "import time\ntime.sleep(0.2)\n"
    events = compile_events(client, code)
    assert [e["stage"] for e in events] == STAGES
    assert not any("forged" in e["data"] for e in events)


SHARED_MAPPING = """
import mmap
size = 6 << 30
m = mmap.mmap(-1, size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
page = b"x" * (1 << 20)
for offset in range(0, size, 1 << 20):
    m[offset:offset + (1 << 20)] = page
print("the whole 6 GiB mapping was written")
"""


def test_a_6_gib_shared_mapping_stops_at_the_memory_limit(make_app: AppFactory) -> None:
    """2: a 6 GiB MAP_SHARED|MAP_ANONYMOUS mapping reached 6.69 GB resident against a
    4096 MiB limit (RLIMIT_DATA does not count shared memory)."""
    app = make_app(MEMORY_LIMIT_MB=512, JOB_TIMEOUT_S=60)
    need(app, "cgroup")
    events = compile_events(app.test_client(), SHARED_MAPPING)
    error = first_error(events)
    assert error["kind"] == "memory" and "512 MiB memory limit" in error["message"], error
    assert "shared memory" in error["message"]
    assert events[-1]["data"]["ok"] is False


UNLINKED_FILES = """
import os
held, written = [], 0
try:
    for i in range(96):  # 96 x 32 MiB = 3 GiB
        for place in ("/tmp", "."):
            f = open(os.path.join(place, f"hold{i}.bin"), "wb")
            os.unlink(f.name)
            held.append(f)
            f.write(b"x" * (16 << 20))
            f.flush()
            written += 16 << 20
except OSError as exc:
    raise SystemExit(f"stopped after {written >> 20} MiB: {exc.strerror}")
print(f"held {written >> 20} MiB")
"""


def test_3_gib_of_unlinked_files_stop_at_the_scratch_budget(make_app: AppFactory) -> None:
    """3: files opened then deleted were invisible to the scratch check: 3000 MiB held
    against a 1 GiB limit."""
    app = make_app(SCRATCH_LIMIT_MB=128, JOB_TIMEOUT_S=60)
    need(app, "tmpfs")
    error = first_error(compile_events(app.test_client(), UNLINKED_FILES))
    assert "No space left on device" in error["message"], error
    held = int(error["message"].split("stopped after ")[1].split(" MiB")[0])
    assert held <= 128, held


FORK_BOMB = """
import os, time
start = time.time()
while time.time() - start < 15:
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
    except OSError:
        time.sleep(0.01)
"""
THREADS_AND_CHILD = """
import subprocess, sys, threading, time
time.sleep(3)  # while the bomb next door is at its limit
threads = [threading.Thread(target=time.sleep, args=(0.5,)) for _ in range(64)]
for t in threads:
    t.start()
for t in threads:
    t.join()
subprocess.run([sys.executable, "-c", "pass"], check=True)
print("64 threads and a child process: fine")
"""


def test_a_normal_job_passes_while_another_fork_bombs(make_app: AppFactory) -> None:
    """4: every job ran as uid 65534 under one process limit: during one job's fork bomb,
    a normal job failed ("Thread creation failed", "Resource temporarily unavailable")."""
    app = make_app(PROCESS_LIMIT=128, JOB_TIMEOUT_S=40, MAX_JOBS=2)
    need(app, "cgroup")
    client = app.test_client()
    results: dict[str, Events] = {}

    def run(name: str, code: str) -> None:
        results[name] = compile_events(app.test_client(), code)

    bomb = threading.Thread(target=run, args=("bomb", FORK_BOMB))
    bomb.start()
    time.sleep(1.0)
    run("normal", THREADS_AND_CHILD)
    bomb.join()
    normal = results["normal"]
    assert "error" not in [e["stage"] for e in normal], first_error(normal)
    assert normal[-1]["data"]["ok"] is True
    assert client.get("/api/health").status_code == 200


def test_seccomp_refuses_unshare_and_mount(make_app: AppFactory) -> None:
    """8: `unshare -Ur` and mounting a tmpfs succeeded inside the sandbox."""
    app = make_app(JOB_TIMEOUT_S=30)
    need(app, "seccomp")
    code = (
        "import ctypes, os, subprocess\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "results = []\n"
        "for flags in (0x10000000, 0x20000, 0x40000000):  # NEWUSER, NEWNS, NEWNET\n"
        "    results.append((libc.unshare(flags), ctypes.get_errno()))\n"
        "results.append((libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno()))\n"
        "results.append((libc.syscall(321, 0, 0, 0), ctypes.get_errno()))  # bpf\n"
        "unshare = subprocess.run(['unshare', '-Ur', 'true']).returncode\n"
        "raise SystemExit(f'results {results} unshare-cli {unshare}')\n"
    )
    message = first_error(compile_events(app.test_client(), code))["message"]
    assert "results [(-1, 1), (-1, 1), (-1, 1), (-1, 1), (-1, 1)]" in message, message
    assert "unshare-cli 0" not in message


def test_the_database_is_invisible_in_a_folder_the_sandbox_shows(
    make_app: AppFactory, tmp_path: Path
) -> None:
    """7: with the database inside the checkout, a job read another job's secret from
    `traces.db-wal` (created after the job started, so never masked)."""
    shown = tmp_path / "checkout"
    shown.mkdir()
    (shown / "visible.txt").write_text("fine")
    tmp_path.chmod(0o755)
    shown.chmod(0o755)
    db = shown / "traces.sqlite3"
    app = make_app(DATABASE=str(db), EXTRA_RO_PATHS=[str(shown)], JOB_TIMEOUT_S=30)
    need(app, "bubblewrap")
    keep = sqlite3.connect(db)  # another writer: -wal and -shm exist during the job
    keep.execute("PRAGMA journal_mode=WAL")
    keep.execute("CREATE TABLE IF NOT EXISTS secret (s TEXT)")
    keep.execute("INSERT INTO secret VALUES ('the other job''s secret')")
    keep.commit()
    assert (shown / "traces.sqlite3-wal").exists()
    code = (
        "import os\n"
        f"folder = {str(shown)!r}\n"
        "names = sorted(os.listdir(folder))\n"
        "leaks = [n for n in os.listdir(folder) if n.startswith('traces')]\n"
        "raise SystemExit(f'names {names} leaks {leaks}')\n"
    )
    try:
        message = first_error(compile_events(app.test_client(), code))["message"]
    finally:
        keep.close()
    assert "names ['visible.txt'] leaks []" in message, message


def test_cleanup_never_follows_a_link() -> None:
    """7: scratch cleanup followed symlinks when repairing permissions: a snippet made the
    server chmod a host file. Run as an unprivileged user, as a non-root server is."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root (to act as an unprivileged owner) and setpriv")
    tmp_path = Path(tempfile.mkdtemp())
    host_file = tmp_path / "host.txt"
    host_file.write_text("the host's")
    host_file.chmod(0o640)
    job = tmp_path / "job"
    (job / "locked").mkdir(parents=True)
    os.symlink(host_file, job / "locked" / "link")
    os.symlink(host_file, job / "link2")
    for path in (job, job / "locked"):
        os.chown(path, 65534, 65534)
    os.lchown(job / "locked" / "link", 65534, 65534)
    (job / "locked").chmod(0o500)  # unwritable: the link cannot be unlinked until repaired
    tmp_path.chmod(0o777)
    module = Path(__file__).resolve().parents[2] / "server" / "sandbox" / "scratch.py"
    script = (
        "import importlib.util, pathlib\n"
        f"spec = importlib.util.spec_from_file_location('scratch', {str(module)!r})\n"
        "scratch = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(scratch)\n"
        f"scratch.remove_tree(pathlib.Path({str(job)!r}))\n"
    )
    done = subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         sys.executable, "-c", script],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert not job.exists()
    assert host_file.read_text() == "the host's" and (host_file.stat().st_mode & 0o777) == 0o640
    shutil.rmtree(tmp_path)


def test_stale_scratch_is_swept_at_start_up(tmp_path: Path) -> None:
    """9: kill -9 of the server leaked scratch directories that nothing swept. A job's lock
    is taken before its directory exists, so a directory whose lock is free is a dead job's
    at any age (issue 30's sweep row): the stale one and the fresh one both go."""
    root = tmp_path / "scratch"
    root.mkdir()
    stale, fresh, held = (root / f"{PREFIX}{n}" for n in ("stale", "fresh", "held"))
    for path in (stale, fresh, held):
        (path / "front").mkdir(parents=True)
        (path / "front" / "snippet.py").write_text("x = 1\n")
    old = time.time() - 3600
    for path in (stale, held):
        os.utime(path, (old, old))
    lock = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(lock, fcntl.LOCK_EX)  # a live server's running job
    try:
        app = create_app({"DATABASE": str(tmp_path / "db" / "t.sqlite3"),
                          "SCRATCH_ROOT": str(root), "JOB_TIMEOUT_S": 5})
        state(app).jobs.shutdown()
    finally:
        os.close(lock)
    assert not stale.exists() and not fresh.exists() and held.exists()


def test_remove_tree_handles_what_a_snippet_leaves(tmp_path: Path) -> None:
    job = tmp_path / "job"
    deep = job / "a"
    for i in range(300):  # deeper than a recursive walk would like
        deep = deep / str(i % 10)
    deep.mkdir(parents=True)
    (job / "a" / "f").write_text("x")
    (job / "a").chmod(0)
    os.symlink("/etc", job / "etc")
    remove_tree(job)
    assert not job.exists() and Path("/etc/passwd").exists()
