"""Run one job: start the sandboxed compiler CLI, relay its NDJSON, enforce the limits.

In: a `Job` (code and options). Out: the job's events, published as they arrive, always
ending with `done`; when the worker dies without `done` (timeout, signal, memory, a limit),
an `error` event names what happened first. The finished trace goes to the `TraceStore`
and its id into the `done` event.

The worker is `WORKER_CMD <scratch>/snippet.py --json --device D --backend B [--no-fusion]
[--inductor] [--entry NAME]`, started through worker_entry.py so that it prints its
StageEvents (docs/events.md) on a pipe of their own, never on fd 1: what the snippet writes
to fd 1 is kept as data (`snippet_stdout` in `done`). server/relay.py reads both pipes and
enforces the output, event and trace caps; `seq` is renumbered here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from server.jobs import SCHEMA_VERSION, Job
from server.kcache import KernelCache
from server.pool import WARM_TIMEOUT_S, WarmPool, WarmWorker
from server.relay import Outcome, Relay, parse_event
from server.sandbox import (
    Isolation,
    Limits,
    SandboxSpec,
    kill_strays,
    make_launch,
    make_scratch,
    remove_scratch,
)
from server.store import Store
from server.warm import READY

__all__ = ["WorkerSettings", "explain", "normalize", "parse_event", "run_job", "scratch_exceeded"]

log = logging.getLogger(__name__)
MiB = 1 << 20
MAX_SCRATCH_FILES = 20000
STDERR_TAIL = 4000
SIGNAL_NAMES: dict[int, str] = {
    signal.SIGSEGV: "SIGSEGV (segmentation fault)",
    signal.SIGBUS: "SIGBUS (bus error)",
    signal.SIGILL: "SIGILL (illegal instruction)",
    signal.SIGFPE: "SIGFPE (arithmetic fault)",
    signal.SIGABRT: "SIGABRT (abort)",
    signal.SIGKILL: "SIGKILL",
    signal.SIGTERM: "SIGTERM",
}


@dataclass(frozen=True)
class WorkerSettings:
    """Everything a job runner needs, built once per app from its config."""

    command: tuple[str, ...]
    isolation: Isolation
    spec: SandboxSpec
    limits: Limits
    repo_dir: Path
    scratch_root: str | None = None
    grace_s: float = 2.0  # how long a worker may linger after `done` before it is killed


def worker_argv(settings: WorkerSettings, job: Job, scratch: str) -> list[str]:
    opts = job.request.options
    argv = [*settings.command, f"{scratch}/snippet.py", "--json"]
    argv += ["--device", str(opts["device"]), "--backend", str(opts["backend"])]
    if not opts.get("fusion", True):
        argv.append("--no-fusion")
    if opts.get("inductor", False):
        argv.append("--inductor")
    if job.request.entry:
        argv += ["--entry", job.request.entry]
    more = {k: v for k, v in opts.items() if k not in ("device", "backend", "fusion", "inductor")}
    if more:  # every other CompileOptions field, checked by server/options.py
        argv += ["--options", json.dumps(more, sort_keys=True)]
    return argv


ENTRY_SCRIPT = Path(__file__).with_name("worker_entry.py")


def wrapped_argv(argv: list[str], events_fd: int) -> list[str]:
    """`python -m compiler ...` as run through worker_entry.py (events on `events_fd`)."""
    return [argv[0], str(ENTRY_SCRIPT), "--events-fd", str(events_fd), "--", *argv[1:]]


def run_job(
    job: Job,
    settings: WorkerSettings,
    store: Store,
    pool: WarmPool | None = None,
    kcache: KernelCache | None = None,
) -> None:
    """The JobManager's runner: one sandboxed worker from start to `done`. With a pool, the
    worker is a warm one (server/pool.py) when one is there, else it starts cold. With a
    shared kernel cache (server/kcache.py) the job sees its entries and, once it is over,
    what it built is verified or rebuilt and shared."""
    iso = settings.isolation
    if job.cancel_requested():
        job.publish("error", cancelled(job))
        finish(job, store, {"ok": False})
        return
    warm = pool.take(job.request.options) if pool is not None else None
    scratch = warm.scratch if warm is not None else make_scratch(settings.scratch_root, iso)
    try:
        _write_snippet(job, scratch, iso)
        if kcache is not None:
            kcache.link_into(scratch)
        with contextlib.ExitStack() as stack:
            if warm is not None:
                proc, stderr, events_r = warm.proc, warm.stderr, warm.events_r
                stack.callback(stderr.close)
                warm.hand(worker_argv(settings, job, warm.view)[1:])
            else:
                stderr = stack.enter_context(tempfile.TemporaryFile())
                proc, events_r = _start_cold(job, settings, scratch, stderr)
            outcome = Outcome()
            relay = Relay(job, settings.limits, normalize,
                          lambda: scratch_exceeded(scratch, settings.limits.scratch_mb * MiB),
                          origin="snippet")  # fmt: skip
            try:
                assert proc.stdout is not None
                if warm is not None and warm.ready_at is None:
                    # Still warming up: the job's wall clock starts once it is ready.
                    outcome = _await_ready(warm, job)
                if outcome.reason is None:
                    deadline = time.monotonic() + settings.limits.wall_s
                    outcome = relay.run(events_r, proc.stdout.fileno(), deadline)
                if outcome.done is not None:
                    finish(job, store, outcome.done, relay.stdout_tail)
            finally:
                os.close(events_r)
                # After `done` or EOF the worker is exiting on its own: give it a moment (so
                # its exit status, e.g. a signal, is its own); after a limit, kill at once.
                stop(proc, settings.grace_s if outcome.reason is None else 0.0)
                if iso.mode != "bubblewrap":
                    kill_strays(scratch)
            if outcome.done is None:
                # A compiler that reported its own error and then died already said what
                # went wrong; only one error event precedes `done`.
                if not any(e["stage"] == "error" for e in job.events):
                    code = _exit_signal(proc.returncode, iso)
                    why = explain(outcome.reason, code, _tail(stderr), job, settings.limits)
                    job.publish("error", why)
                finish(job, store, {"ok": False}, relay.stdout_tail)
        if kcache is not None:
            kcache.promote(scratch)  # the worker is dead: its files are only data now
    finally:
        remove_scratch(scratch)


def _start_cold(
    job: Job, settings: WorkerSettings, scratch: Path, stderr: IO[bytes]
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a worker for this job now; returns it and the read end of its event channel."""
    events_r, events_w = os.pipe()
    launch = make_launch(
        settings.isolation,
        lambda view: wrapped_argv(worker_argv(settings, job, view), events_w),
        scratch,
        settings.spec,
        settings.limits,
        settings.repo_dir,
    )
    try:
        proc = subprocess.Popen(
            launch.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=launch.env,
            cwd=launch.cwd,
            start_new_session=True,
            pass_fds=(events_w,),
            preexec_fn=launch.preexec,  # noqa: PLW1509 - only setrlimit calls
            user=launch.user,
            group=launch.group,
            extra_groups=[] if launch.user is not None else None,
        )
    except BaseException:
        os.close(events_r)
        raise
    finally:
        os.close(events_w)
    return proc, events_r


def _await_ready(warm: WarmWorker, job: Job) -> Outcome:
    """Wait for a warming worker's ready line (on its event channel, before any event)."""
    end = time.monotonic() + WARM_TIMEOUT_S
    while time.monotonic() < end:
        if job.cancel_requested():
            return Outcome(reason="cancelled")
        ready, _, _ = select.select([warm.events_r], [], [], 0.1)
        if ready:
            got = os.read(warm.events_r, len(READY))
            return Outcome() if got == READY else Outcome(reason="warm")
    return Outcome(reason="warm")


def _write_snippet(job: Job, scratch: Path, iso: Isolation) -> None:
    path = scratch / "snippet.py"
    path.write_text(job.request.code, encoding="utf-8")
    if iso.uid is not None:
        os.chown(path, iso.uid, iso.gid if iso.gid is not None else -1)


def normalize(event: dict[str, Any], limits: Limits) -> dict[str, Any]:
    """An `exception` error that is really the memory limit says so."""
    data = event["data"]
    message = str(data.get("message", ""))
    if event["stage"] == "error" and data.get("kind") == "exception" and "MemoryError" in message:
        return {**data, "kind": "memory", "message": f"{_memory_message(limits)} ({message})"}
    return data


def scratch_exceeded(scratch: Path, max_bytes: int) -> bool:
    """Is the scratch tree over its byte or file budget? Stops counting early."""
    used, files = 0, 0
    stack = [str(scratch)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            files += 1
            if files > MAX_SCRATCH_FILES:
                return True
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    used += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
            if used > max_bytes:
                return True
    return False


def stop(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Let the worker exit for `grace_s`, then kill its process group.

    With bubblewrap the group holds the namespace's pid 1, and when it dies the kernel kills
    every process left in the namespace, including any that called setsid().
    """
    if grace_s > 0:
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        log.error("worker %d did not die after SIGKILL", proc.pid)
    if proc.stdout is not None:
        proc.stdout.close()


def finish(job: Job, store: Store, done: dict[str, Any], stdout: str = "") -> None:
    """Store the trace, then publish `done` with its trace_id.

    `stdout` is what the snippet wrote to fd 1 (its tail): shown as data, never parsed.
    """
    ok = bool(done.get("ok", False)) and not any(e["stage"] == "error" for e in job.events)
    data = {**done, "ok": ok, **timing(job)}
    data.pop("trace_id", None)
    if stdout:
        data["snippet_stdout"] = stdout
    closing = {"schema": SCHEMA_VERSION, "seq": len(job.events), "stage": "done", "ms": 0.0,
               "data": data}
    try:
        opts = job.request.trace_options()
        data["trace_id"] = store.put(job.request.code, opts, [*job.events, closing], ok)
    except Exception:
        log.exception("job %s: could not store the trace", job.id)
        data["store_error"] = "the trace could not be stored"
    job.publish("done", data)


def timing(job: Job) -> dict[str, float]:
    """Wall time from the request to `done` (what the user waited) next to the sum of the
    stage times the compiler reported (what it spent compiling)."""
    stages = sum(float(e.get("ms") or 0.0) for e in job.events)
    return {"wall_ms": round((time.time() - job.created) * 1000, 1), "stages_ms": round(stages, 1)}


def cancelled(job: Job) -> dict[str, Any]:
    stage = job.last_stage or "source"
    return {
        "stage": stage,
        "kind": "cancelled",
        "message": f"Cancelled during the {stage} stage" if job.events else "Cancelled",
        "line": None,
        "traceback": None,
    }


def _exit_signal(returncode: int | None, iso: Isolation) -> int | None:
    """The signal that killed the worker (bubblewrap reports it as 128 + signal)."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if iso.mode == "bubblewrap" and 128 < returncode < 128 + 65:
        return returncode - 128
    return None


def _tail(stderr: IO[bytes]) -> str:
    stderr.seek(0, os.SEEK_END)
    size = stderr.tell()
    stderr.seek(max(0, size - STDERR_TAIL))
    return stderr.read().decode("utf-8", errors="replace").strip()


def _memory_message(limits: Limits) -> str:
    return f"Out of memory: the job went over its {limits.memory_mb} MiB memory limit"


def explain(
    reason: str | None, sig: int | None, stderr: str, job: Job, limits: Limits
) -> dict[str, Any]:
    """The `error` event for a worker that stopped without `done`."""
    stage = job.last_stage or "source"
    during = f"during the {stage} stage"
    kind, message = "killed", ""
    if reason == "cancelled":
        return cancelled(job)
    if reason == "warm":
        kind, message = "sandbox", "The warm worker for this job did not start; try again"
    elif reason == "timeout":
        kind = "timeout"
        message = (
            f"Timed out: the job ran longer than {limits.wall_s:g} s ({during}) and was stopped"
        )
    elif reason == "output":
        kind = "sandbox"
        message = f"Stopped: the job printed more than {limits.output_mb} MiB of output"
    elif reason in ("event", "events", "trace"):
        kind = "sandbox"
        what = {
            "event": f"an event larger than {limits.event_kb} KiB",
            "events": f"more than {limits.events} events",
            "trace": f"a trace larger than {limits.trace_mb} MiB",
        }[reason]
        message = f"Stopped: the worker sent {what} ({during})"
    elif reason == "scratch":
        kind = "sandbox"
        message = (
            f"Stopped: the job wrote more than {limits.scratch_mb} MiB or "
            f"{MAX_SCRATCH_FILES} files to its scratch directory"
        )
    elif sig == signal.SIGXCPU:
        kind = "timeout"
        message = f"Timed out: the job used more than {limits.cpu_s} s of CPU time ({during})"
    elif sig == signal.SIGXFSZ:
        kind = "sandbox"
        message = f"Stopped: the job wrote a file larger than {limits.file_mb} MiB"
    elif "MemoryError" in stderr or "std::bad_alloc" in stderr:
        kind, message = "memory", _memory_message(limits)
    elif sig == signal.SIGKILL:
        message = f"The worker was killed by SIGKILL {during} (most likely out of memory)"
    elif sig is not None:
        name = SIGNAL_NAMES.get(sig, f"signal {sig}")
        message = (
            f"The worker crashed with {name} {during}: the snippet or a generated kernel "
            "touched memory it must not"
        )
    elif stderr.startswith("bwrap:"):
        kind, message = "sandbox", f"The sandbox could not start: {stderr.splitlines()[0]}"
    else:
        kind = "exception"
        last = stderr.splitlines()[-1] if stderr else "no output"
        message = f"The worker stopped {during} without finishing: {last}"
    return {"stage": stage, "kind": kind, "message": message, "line": None, "traceback": stderr}
