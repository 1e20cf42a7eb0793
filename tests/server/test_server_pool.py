"""The warm pool, Cancel, wall time in `done`, and the production server (gunicorn)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from server_support import (
    FAKE_BACK,
    FAKE_WORKER,
    REPO,
    AppFactory,
    compile_events,
    first_error,
    stage_names,
    state,
    stream,
    submit,
    wait_until,
)

from kernelscope.compiler.events.check import event_errors
from kernelscope.server.cli import parser
from kernelscope.server.web.streams import parse_sse

# Says which process it ran in (its start time: pids repeat across pid namespaces) and
# whether an earlier snippet ran in that process before (it leaves a mark in builtins).
WHO_SNIPPET = """import builtins
start = open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19]
seen = getattr(builtins, 'kernelscope_seen', False)
builtins.kernelscope_seen = True
raise ValueError(f'start={start} seen={seen}')
"""


def _who(events: list[dict]) -> tuple[str, str]:
    match = re.search(r"start=(\d+) seen=(\w+)", first_error(events)["message"])
    assert match, events
    return match.group(1), match.group(2)


def test_jobs_run_in_warm_workers_each_used_once(make_app: AppFactory) -> None:
    app = make_app(WARM_POOL=2, MAX_JOBS=1)
    pool = state(app).jobs.pool
    assert pool is not None and pool.wait_ready(2, timeout=30)
    client = app.test_client()
    runs = []
    for _ in range(3):
        # A job that finds the pool empty (its refill still starting a process, which on a
        # loaded machine can take longer than a job) starts cold by design; wait for a
        # started worker, so every job here must be handed one.
        assert wait_until(lambda: pool.stats()["ready"] + pool.stats()["warming"] >= 1, 30)
        runs.append(_who(compile_events(client, WHO_SNIPPET)))
    stats = pool.stats()
    assert stats["handed_out"] == 3 and stats["cold_starts"] == 0
    # Every job got a process of its own, in which no snippet had run before.
    assert len({start for start, _ in runs}) == 3
    assert all(seen == "False" for _, seen in runs)
    assert wait_until(lambda: pool.stats()["ready"] + pool.stats()["warming"] == 2, 10)


def test_without_a_pool_jobs_start_cold(make_app: AppFactory) -> None:
    app = make_app(WARM_POOL=0)
    events = compile_events(app.test_client(), "x = 1\n")
    assert events[-1]["data"]["ok"] is True
    assert state(app).jobs.stats()["pool"]["size"] == 0


def test_a_warm_worker_runs_the_same_events_as_a_cold_one(make_app: AppFactory) -> None:
    cold = compile_events(make_app(WARM_POOL=0, EARLY_SOURCE=True).test_client(), "y = 3\n")
    warm_app = make_app(WARM_POOL=1)
    assert state(warm_app).jobs.pool.wait_ready(1, timeout=30)
    warm = compile_events(warm_app.test_client(), "y = 3\n")
    # The cold job's first event is the server's own `source` (server/jobs/early.py, while the
    # worker imports torch); after it, the same events as the warm job's.
    assert cold[0]["stage"] == "source" and cold[0]["origin"] == "server"
    strip = lambda evs: [e["stage"] for e in evs]  # noqa: E731
    assert strip(cold[1:]) == strip(warm)
    assert [e["seq"] for e in cold] == list(range(len(cold)))
    assert warm[0]["data"]["code"] == "y = 3\n" == cold[0]["data"]["code"]


def test_done_carries_wall_time_next_to_the_stage_sum(client: FlaskClient) -> None:
    events = compile_events(client, "# fake-sleep: 0.05\nx = 1\n")
    done = events[-1]["data"]
    stage_sum = sum(e["ms"] for e in events)
    assert abs(done["stages_ms"] - stage_sum) < 1.0
    assert done["wall_ms"] >= done["stages_ms"] > 0
    assert done["wall_ms"] < 120_000  # the job's wall clock, not a speed test


@pytest.mark.parametrize("backend", ["embedded", "redis"], indirect=True)
def test_cancel_kills_a_running_job(make_app: AppFactory) -> None:
    """Cancel stops the job in the stage it is in. Each stage here takes 10 s, so the job
    would run for 70 s: its stream shows it was stopped by its stages, not by a clock read
    (a 3 s bound on the cancel failed on a loaded host)."""
    client = make_app(JOB_TIMEOUT_S=300).test_client()
    job_id = submit(client, "# fake-sleep: 10\nx = 1\n")
    assert wait_until(lambda: client.get(f"/api/jobs/{job_id}").get_json()["events"] >= 1, 60)
    reply = client.post(f"/api/jobs/{job_id}/cancel")
    assert reply.status_code == 202 and reply.get_json()["cancelled"] is True
    events = stream(client, job_id)
    stages = stage_names(events)
    assert not {"codegen", "compile", "run", "profile"} & set(stages), stages
    error = first_error(events)
    assert error["kind"] == "cancelled" and "Cancelled" in error["message"]
    done = events[-1]
    assert done["stage"] == "done" and done["data"]["ok"] is False
    trace = client.get(f"/api/traces/{done['data']['trace_id']}").get_json()
    assert trace["ok"] is False and trace["events"][-2]["data"]["kind"] == "cancelled"
    # Cancelling a finished job is refused; an unknown job is 404.
    assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 409
    assert client.post("/api/jobs/nosuchjob/cancel").status_code == 404
    # The next job works.
    assert compile_events(client, "x = 2\n")[-1]["data"]["ok"] is True


@pytest.mark.parametrize("backend", ["embedded", "redis"], indirect=True)
def test_cancel_a_queued_job_never_starts_it(make_app: AppFactory) -> None:
    client = make_app(MAX_JOBS=1, WARM_POOL=0, JOB_TIMEOUT_S=30).test_client()
    running = submit(client, "# fake-sleep: 0.5\nx = 1\n")
    queued = submit(client, "open('started', 'w')\n")
    assert client.post(f"/api/jobs/{queued}/cancel").status_code == 202
    events = [e for e in stream(client, queued) if e["stage"] != "waiting"]
    assert [e["stage"] for e in events] == ["error", "done"]
    assert events[0]["data"]["kind"] == "cancelled"
    other = stream(client, running)  # the job that was running is not touched
    assert other[-1]["stage"] == "done"
    assert all(e["data"].get("kind") != "cancelled" for e in other if e["stage"] == "error")


def test_serve_help_lists_every_flag() -> None:
    text = parser().format_help()
    serve = subprocess.run(
        [sys.executable, "-m", "kernelscope", "serve", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert serve.returncode == 0 and "serve" in text
    for flag in (
        "--host", "--port", "--db", "--queue", "--max-jobs", "--queue-size", "--timeout",
        "--isolation", "--pool", "--workers", "--connections", "--strict", "--debug", "--config",
    ):  # fmt: skip
        assert flag in serve.stdout, flag
    worker = subprocess.run(
        [sys.executable, "-m", "kernelscope", "worker", "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    for flag in ("--queue", "--db", "--pool", "--burst", "--timeout", "--isolation"):
        assert flag in worker.stdout, flag


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"WORKER_CMD": FAKE_WORKER, "BACK_CMD": FAKE_BACK, "WARM_IMPORTS": [],
                    "WARM_UP": False})
    )
    port = _free_port()
    cmd = [sys.executable, "-m", "kernelscope.server", "--port", str(port),
           "--db", str(tmp_path / "t.db")]
    proc = subprocess.Popen(
        [*cmd, "--config", str(config), *flags],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(base + "/api/health", timeout=5).close()
            return proc, base
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the server did not start")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def _compile_over_http(base: str, code: str) -> tuple[list[dict], str]:
    request = urllib.request.Request(
        base + "/api/compile",
        data=json.dumps({"code": code}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as r:
        job = json.load(r)
    with urllib.request.urlopen(base + job["events"], timeout=30) as r:
        server = r.headers.get("Server", "")
        return parse_sse(r.read().decode()), server


def test_serve_runs_gunicorn_and_streams_events(tmp_path: Path) -> None:
    proc, base = _serve(tmp_path)
    try:
        events, server = _compile_over_http(base, "# fake-sleep: 0.2\nx = 1\n")
        assert "gunicorn" in server.lower()
        assert events[-1]["stage"] == "done" and events[-1]["data"]["ok"] is True
        assert [e["seq"] for e in events] == list(range(len(events)))
    finally:
        _stop(proc)


def test_serve_debug_runs_the_development_server(tmp_path: Path) -> None:
    proc, base = _serve(tmp_path, "--debug")
    try:
        events, server = _compile_over_http(base, "x = 1\n")
        assert "werkzeug" in server.lower()
        assert events[-1]["data"]["ok"] is True
    finally:
        _stop(proc)


def test_the_warm_up_covers_the_gpu_where_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # A job on the GPU host paid for the CUDA context and Triton's driver set-up inside its
    # compile stage while the warm-up compiled on the CPU only.
    import torch

    import kernelscope.server.jobs.warm as warm
    from kernelscope.compiler.options import CompileOptions

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert warm.warmup_devices() == ["cpu"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert warm.warmup_devices() == ["cpu", "cuda"]
    compiled: list[str] = []

    def fake_pipeline(code: str, options: CompileOptions, path: str) -> Iterator[object]:
        compiled.append(options.device)
        return iter(())

    import kernelscope.compiler.pipeline as pipeline

    monkeypatch.setattr(pipeline, "run_pipeline", fake_pipeline)
    warm.warm_up()
    assert compiled == ["cpu", "cuda"]


_TABLE = """
import sys
from kernelscope.compiler.capture.decompositions import decomposition_table
{before}
print(json.dumps({{"table": sorted(str(k) for k in decomposition_table()),
                  "pattern_matcher": "torch._inductor.pattern_matcher" in sys.modules}}))
"""


def _table_in_a_fresh_process(before: str, tmp_path: Path) -> dict[str, object]:
    code = "import json, importlib.util\n" + _TABLE.format(before=before)
    env = {**os.environ, "KERNELSCOPE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=300, check=True).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def test_the_warm_up_imports_what_a_training_capture_would_and_captures_the_same(
    tmp_path: Path,
) -> None:
    # AOTAutograd's min-cut partition imported Inductor's pattern matcher (167 modules) in
    # the job's own time on every training graph. The warm-up imports it now, after its
    # compile has made our decomposition table, so the table (and every graph captured with
    # it) is the one a cold job makes: importing it first would add 13 ops' rules.
    warm = f"""
spec = importlib.util.spec_from_file_location("warm", {str(REPO / "server/jobs/warm.py")!r})
warm = importlib.util.module_from_spec(spec)
spec.loader.exec_module(warm)
warm.warm_up()
"""
    warmed = _table_in_a_fresh_process(warm, tmp_path)
    cold = _table_in_a_fresh_process("import kernelscope.compiler.pipeline", tmp_path)
    assert warmed["pattern_matcher"] is True and cold["pattern_matcher"] is False
    assert warmed["table"] == cold["table"]


def test_a_cold_job_streams_source_before_its_worker_has_said_anything(
    make_app: AppFactory, tmp_path: Path
) -> None:
    """A cold worker spends seconds importing torch before its first event; the server's
    own `source` (from the snippet text, same code and so the same lines) is out before
    it. The fake front half is held before its first event until the test lets it go."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    app = make_app(WARM_POOL=0, JOB_TIMEOUT_S=30, SCRATCH_ROOT=str(scratch), EARLY_SOURCE=True)
    client = app.test_client()
    code = "x = 1\n# fake-import: wait\n"
    job_id = submit(client, code, inductor=True)
    job = state(app).jobs.get(job_id)
    assert wait_until(lambda: job.count >= 1, 10)
    held = job.events
    assert [(e["stage"], e["origin"]) for e in held] == [("source", "server")]
    assert not job.finished and event_errors(held[0]) == []
    early = held[0]["data"]
    assert early["code"] == code and early["backend"] == "cpp" and early["inputs"] == []
    assert early["options"]["inductor"] is True
    for front in scratch.glob("*/front"):
        (front / "import-gate").touch()
    events = stream(client, job_id)
    assert [(e["stage"], e["origin"]) for e in events[:2]] == [("source", "server"),
                                                               ("source", "snippet")]
    assert events[1]["data"]["code"] == code and events[-1]["data"]["ok"] is True


def test_a_queued_job_says_what_it_waits_on_at_once(make_app: AppFactory) -> None:
    """With every slot busy, a new job's stream used to stay silent (heartbeats only) until
    a slot freed; now its first event, published as it is queued, names what it waits on,
    and it hears again when its place changes and about every second."""
    app = make_app(MAX_JOBS=1, WARM_POOL=0, JOB_TIMEOUT_S=30)
    client = app.test_client()
    running = submit(client, "# fake-sleep: 0.6\nx = 1\n")
    jobs = state(app).jobs
    assert wait_until(lambda: jobs.running == 1, 20)
    second, third = submit(client, "x = 2\n"), submit(client, "x = 3\n")
    first_events = [jobs.get(j).events[0] for j in (second, third)]  # there the moment it is
    assert [e["stage"] for e in first_events] == ["waiting", "waiting"]
    assert [e["data"]["message"] for e in first_events] == [
        "waiting for a worker: 1 busy, you are 1st", "waiting for a worker: 1 busy, you are 2nd"]
    assert all(e["origin"] == "server" and event_errors(e) == [] for e in first_events)
    events = stream(client, third)
    waits = [e["data"] for e in events if e["stage"] == "waiting"]
    assert [w["position"] for w in waits][:1] == [2] and waits[-1]["position"] == 1
    assert all(w["on"] == "slot" and w["busy"] == 1 for w in waits)
    assert events[-1]["data"]["ok"] is True
    assert stream(client, running)[-1]["data"]["ok"] is True


def test_the_pool_warms_its_replacements_at_once(make_app: AppFactory) -> None:
    """The refill used to start one worker and wait for its warm-up before the next: after
    two jobs took both workers, the second replacement started only once the first was
    warm. Now both start at once (each warm-up watched on its own)."""
    app = make_app(WARM_POOL=2, MAX_JOBS=2, WARM_IMPORTS=["torch"])  # a warm-up of seconds
    pool = state(app).jobs.pool
    assert pool is not None and pool.wait_ready(2, timeout=120)
    taken = [pool.take({"device": "cpu", "backend": "cpp"}) for _ in range(2)]
    try:
        assert all(w is not None for w in taken)
        assert wait_until(lambda: pool.spawned == 4, 30)
        # Both replacements were started before either had warmed up (importing torch).
        assert pool.stats()["ready"] == 0 and pool.stats()["warming"] == 2
    finally:
        for w in taken:
            if w is not None:
                w.discard()


def test_a_replacement_waits_while_a_job_runs_and_another_worker_is_ready(
        make_app: AppFactory) -> None:
    """A replacement warming beside the job took a third of the job's CPU on 2 cores (the
    4-block GPT done in 3.8-4.8 s against 2.1 s, docs/perf/model-compile-latency.md). While
    the taken worker lives and another is ready, nothing starts; then the pool refills."""
    app = make_app(WARM_POOL=2, MAX_JOBS=2)
    pool = state(app).jobs.pool
    assert pool is not None and pool.wait_ready(2, timeout=60)
    taken = pool.take({"device": "cpu", "backend": "cpp"})
    assert taken is not None
    try:
        time.sleep(1.5)  # the refill loop looks every 0.2 s while a job runs
        assert pool.spawned == 2 and pool.stats()["ready"] == 1
    finally:
        taken.discard()
    assert wait_until(lambda: pool.spawned == 3, 30)


def test_a_warm_worker_sets_its_heap_aside_from_the_collector(make_app: AppFactory) -> None:
    """A warm worker frees what its warm-up left and freezes the rest (gc.freeze), so the
    job's full collections walk only the job's own objects (0.3-0.8 s of CPU per half on
    the 6-block Llama step). The snippet here runs in the warm worker's process."""
    app = make_app(WARM_POOL=1, MAX_JOBS=1)
    assert state(app).jobs.pool.wait_ready(1, timeout=60)
    snippet = "import gc\nraise ValueError(f'frozen={gc.get_freeze_count()}')\n"
    match = re.search(r"frozen=(\d+)", first_error(compile_events(app.test_client(),
                                                                  snippet))["message"])
    assert match and int(match.group(1)) > 1000, match


def test_a_job_given_a_warming_worker_hears_so_at_once(make_app: AppFactory) -> None:
    """A job handed a worker still warming up used to wait in silence for its warm-up (10.8 s
    for a third quick compile); now the server's `source` comes at once and a `waiting`
    event says what it waits on. (The worker's warm-up imports torch: seconds.)"""
    app = make_app(WARM_POOL=1, MAX_JOBS=1, EARLY_SOURCE=True, JOB_TIMEOUT_S=60,
                   WARM_IMPORTS=["torch"])
    pool = state(app).jobs.pool
    assert pool is not None
    pool.start()
    assert wait_until(lambda: pool.stats()["warming"] == 1, 20)
    client = app.test_client()
    job_id = submit(client, "x = 1\n")
    events = stream(client, job_id)
    assert pool.stats()["handed_out"] == 1 and pool.stats()["cold_starts"] == 0
    stages = [(e["stage"], e.get("origin")) for e in events]
    assert stages[0] == ("source", "server"), stages
    waits = [e for e in events if e["stage"] == "waiting"]
    assert waits and waits[0]["seq"] == 1, stages
    assert waits[0]["data"]["on"] == "warm-up" and "warm up" in waits[0]["data"]["message"]
    assert all(e["origin"] == "server" and event_errors(e) == [] for e in waits)
    assert events[-1]["data"]["ok"] is True
