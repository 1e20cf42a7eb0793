"""Run one job: start the sandboxed compiler CLI, relay its NDJSON, enforce the limits.

In: a `Job` (code and options). Out: the job's events, published as they arrive, always
ending with `done`; when the worker dies without `done` (timeout, signal, memory, a limit),
an `error` event names what happened first. The finished trace goes to the `Store`
and its id into the `done` event.

The worker is `WORKER_CMD <scratch>/snippet.py --json --device D --backend B [--no-fusion]
[--inductor] [--entry NAME]`, started through worker_entry.py so that it prints its
StageEvents (docs/events.md) on a pipe of their own, never on fd 1: what the snippet writes
to fd 1 is kept as data (`snippet_stdout` in `done`). server/jobs/relay.py reads both pipes and
enforces the output, event and trace caps; `seq` is renumbered here.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import select
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from kernelscope.compiler.events.read import envelope
from kernelscope.server.jobs.early import FILENAME as SNIPPET
from kernelscope.server.jobs.early import early_source
from kernelscope.server.jobs.finish import finish
from kernelscope.server.jobs.followups import FollowUps, asked
from kernelscope.server.jobs.kcache import KernelCache
from kernelscope.server.jobs.manager import WAIT_TICK_S, Job
from kernelscope.server.jobs.phase import LIVE_FRONT, PhasePolicy
from kernelscope.server.jobs.pool import WARM_TIMEOUT_S, WarmPool, WarmWorker
from kernelscope.server.jobs.quiet import QUIET_S, Quiet
from kernelscope.server.jobs.relay import Outcome, Relay, parse_event
from kernelscope.server.jobs.trust import conform_payload
from kernelscope.server.jobs.warm import READY
from kernelscope.server.jobs.why import (
    MAX_SCRATCH_FILES,
    cancelled,
    exit_signal,
    explain,
    normalize,
)
from kernelscope.server.sandbox.cgroups import JobCgroup
from kernelscope.server.sandbox.launch import (
    Isolation,
    Limits,
    SandboxSpec,
    event_channel,
    kill_strays,
    make_launch,
)
from kernelscope.server.sandbox.scratch import JobDir
from kernelscope.server.store.rows import Store

__all__ = ["WorkerSettings", "cancelled", "explain", "normalize", "parse_event", "run_job",
           "scratch_exceeded"]

log = logging.getLogger(__name__)
MiB = 1 << 20
STDERR_TAIL = 4000
WARM_QUIET_S = 0.3  # a worker ready within this is not worth a `waiting` event


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
    back_command: tuple[str, ...] | None = None  # the back half; None: one process
    early_source: bool = True  # a cold job's `source` from the server at once (early.py)
    quiet_s: float = QUIET_S  # the server's `progress` for a worker this quiet (quiet.py)


BUNDLE = "capture.ksb"


def _option_flags(job: Job) -> list[str]:
    opts = job.request.options
    argv = ["--json", "--device", str(opts["device"]), "--backend", str(opts["backend"])]
    if not opts.get("fusion", True):
        argv.append("--no-fusion")
    if opts.get("inductor", False):
        argv.append("--inductor")
    more = {k: v for k, v in opts.items() if k not in ("device", "backend", "fusion", "inductor")}
    if more:  # every other CompileOptions field, checked by server/web/options.py
        argv += ["--options", json.dumps(more, sort_keys=True)]
    return argv


def front_argv(settings: WorkerSettings, job: Job, scratch: str, split: bool) -> list[str]:
    """The front half (or, unsplit, the whole pipeline) on the snippet."""
    argv = [*settings.command, f"{scratch}/{SNIPPET}", *_option_flags(job)]
    if split:
        argv += ["--front-only", "--bundle", f"{scratch}/{BUNDLE}"]
    if job.request.entry:
        argv += ["--entry", job.request.entry]
    return argv


def back_argv(settings: WorkerSettings, job: Job, scratch: str, replay_source: bool = True
              ) -> list[str]:
    """The back half on the bundle; options from the request, never from the bundle.
    `replay_source` false: the front's `source` was streamed already."""
    assert settings.back_command is not None
    flags = [] if replay_source else ["--no-replay-source"]
    return [*settings.back_command, f"{scratch}/{BUNDLE}", *_option_flags(job), *flags,
            "--code", f"{scratch}/{SNIPPET}"]


ENTRY_SCRIPT = Path(__file__).with_name("worker_entry.py")


def wrapped_argv(argv: list[str], events_fd: int) -> list[str]:
    """`python -m kernelscope.compiler ...` as run through worker_entry.py (events on
    `events_fd`)."""
    return [argv[0], str(ENTRY_SCRIPT), "--events-fd", str(events_fd), "--", *argv[1:]]


@dataclass
class Phase:
    """One sandboxed process of a job, after it ended."""

    outcome: Outcome
    returncode: int | None
    stderr: str
    stdout: str  # the tail of what it wrote to fd 1 (data)
    stages: list[str]  # the stages it reported, in order
    trusted: bool  # the back half: a process that never ran the snippet
    said: list[tuple[str, dict[str, Any], float]]  # (stage, data, ms) of those stages
    deadline: float  # the job's wall clock (monotonic), shared by both halves


def run_job(
    job: Job,
    settings: WorkerSettings,
    store: Store,
    pool: WarmPool | None = None,
    kcache: KernelCache | None = None,
) -> None:
    """The JobManager's runner: a job from its first sandboxed process to `done`.

    With a back command (the default), two sandboxes: the front half runs the snippet and
    writes the capture bundle; its events are not used. The server copies the bundle into a
    fresh directory, and the back half, our code alone, replays source and capture from it
    and runs every stage after capture: its events are the trace. Without one (a custom
    WORKER_CMD), one sandbox runs the whole pipeline and every event is the snippet's.
    """
    if job.cancel_requested():
        job.publish("error", cancelled(job), origin="server")
        finish(job, store, {"ok": False})
        return
    warm = pool.take(job.request.options) if pool is not None else None
    jobdir, group = (warm.jobdir, warm.group) if warm is not None else new_job_dir(settings)
    split = settings.back_command is not None
    stages = asked(job.request.options)
    follow = FollowUps(job, store, stages) if stages else None
    try:
        compiling = _prepare(job, settings, jobdir, warm, kcache)
        front = run_phase(settings, jobdir, PhasePolicy.front(job) if split else
                          PhasePolicy.whole(job, follow),
                          lambda v: front_argv(settings, job, v, split=split), None, group,
                          warm=warm)
        if not split:
            conclude(job, store, front, settings, group, stdout=front.stdout, follow=follow)
        else:
            _after_front(job, store, settings, jobdir, group, front, follow,
                         warm.back if warm is not None else None)
        _promote(kcache, group, compiling, split)
    finally:
        _release(job, jobdir, group, warm, follow)


def _promote(kcache: KernelCache | None, group: JobCgroup | None, compiling: Path,
             split: bool) -> None:
    """With every process of the job dead (its cgroup killed), what it compiled is data:
    into the shared cache, results only from our own back half."""
    if group is not None:
        group.kill()
    if kcache is not None:
        kcache.promote(compiling, results=split)


def _prepare(job: Job, settings: WorkerSettings, jobdir: JobDir, warm: WarmWorker | None,
             kcache: KernelCache | None) -> Path:
    """The job's directory made ready for its first process; returns the scratch of the
    process that compiles (the back half's, or the one process's).

    With a pool, the front (or the one process) is a warm worker (server/jobs/pool.py) when one
    is there, in the job directory and cgroup the pool made for it. With a shared kernel
    cache (server/jobs/kcache.py) the process that compiles sees its entries and, once it is
    over, what it built is verified or rebuilt and shared.
    """
    compiling = jobdir.phase("back" if settings.back_command is not None else "front")
    if (warm is None or warm.ready_at is None) and settings.early_source:
        # A cold worker imports torch first; a warm one still warming up finishes that.
        job.publish("source", early_source(job.request), origin="server")
    _write_snippet(job, jobdir.phase("front"), settings.isolation)
    if kcache is not None:
        kcache.link_into(compiling)
    return compiling


def _release(job: Job, jobdir: JobDir, group: JobCgroup | None, warm: WarmWorker | None,
             follow: FollowUps | None) -> None:
    """Whatever became of the job: no follow-up left waiting, its cgroups and directory
    gone (the warm back half's too)."""
    if follow is not None and job.following:  # never left waiting for an event
        follow.end("the job supervisor failed; see the server log")
    if group is not None:
        group.remove()
    if warm is not None and warm.back is not None and warm.back.group is not None:
        warm.back.group.kill()
        warm.back.group.remove()
    jobdir.remove()


def _after_front(job: Job, store: Store, settings: WorkerSettings, jobdir: JobDir,
                 group: JobCgroup | None, front: Phase, follow: FollowUps | None,
                 back_warm: WarmWorker | None) -> None:
    """A split job after its front half: the snippet's own failure, or the back half on
    the bundle handed over, or the reason there is none."""
    iso, limits = settings.isolation, settings.limits
    taken: bool | None = False  # the hand-over to the back half (_hand_over)
    if front.outcome.reason is None and "error" in front.stages:
        # The snippet's own failure (a syntax error, an exception): nothing to compile,
        # and a failure is all the front can claim, labelled as the snippet's words.
        for stage, data, ms in front.said:
            if stage not in LIVE_FRONT:  # those were published as they came
                job.publish(stage, conform_payload(stage, data, job.request), ms,
                            origin="snippet")
            if stage == "error":
                break
        finish(job, store, {"ok": False}, front.stdout, "snippet")
    elif front.outcome.reason is None and (taken := _hand_over(job, jobdir, iso, limits)):
        streamed = "source" in front.stages
        back = run_phase(settings, jobdir, PhasePolicy.back(job, follow, front.stdout),
                         lambda v: back_argv(settings, job, v, not streamed),
                         front.deadline, group, warm=back_warm)
        conclude(job, store, back, settings, group, stdout=front.stdout, follow=follow)
    elif taken is None:  # the scratch was full: the job's error, with its permalink
        job.publish("error", explain("scratch", None, "", job, limits), origin="server")
        finish(job, store, {"ok": False}, front.stdout)
    else:
        conclude(job, store, front, settings, group, stdout=front.stdout)


def new_job_dir(settings: WorkerSettings) -> tuple[JobDir, JobCgroup | None]:
    """A job directory (a tmpfs of the scratch budget where the server may mount one) and
    the job's cgroups (where the host delegates them)."""
    iso, limits = settings.isolation, settings.limits
    jobdir = JobDir(settings.scratch_root, iso.uid, iso.gid,
                    limits.scratch_mb if iso.tmpfs else None)
    try:
        group = (JobCgroup(iso.cgroups, jobdir.path.name, limits.memory_mb, limits.processes,
                           limits.tcp_mb) if iso.cgroups.present else None)
    except OSError:
        jobdir.remove()
        raise
    return jobdir, group


def run_phase(
    settings: WorkerSettings,
    jobdir: JobDir,
    policy: PhasePolicy,
    argv: Callable[[str], list[str]],
    deadline: float | None,
    group: JobCgroup | None,
    warm: WarmWorker | None = None,
) -> Phase:
    """Run one sandboxed process (started now, or the warm one given), relay its event
    channel, stop it, and say how it ended. `deadline` None: the wall clock starts when the
    process is ready. What its events become is the `policy`'s (server/jobs/phase.py):
    which are published into the job, with what origin, and when `done` goes out ahead of
    the follow-ups.
    """
    job, limits = policy.job, settings.limits
    scratch = jobdir.phase(policy.name)

    with contextlib.ExitStack() as stack:
        proc, stderr, events_r = _start(stack, settings, scratch, argv, group, warm)
        walk = not settings.isolation.tmpfs  # a tmpfs enforces the budget itself
        relay = Relay(job, limits, normalize, policy.take, lambda: walk and scratch_exceeded(
            jobdir.path, limits.scratch_mb * MiB), until_done=policy.publish,
            quiet=Quiet(job, settings.quiet_s, policy.trusted))
        policy.own_stdout = lambda: relay.stdout_tail
        outcome = Outcome()
        try:
            assert proc.stdout is not None
            outcome, deadline = _await_start(warm, job, deadline, limits.wall_s)
            policy.deadline = deadline
            if outcome.reason is None:
                outcome = relay.run(events_r, proc.stdout.fileno(), deadline)
        finally:
            os.close(events_r)
            _stop_phase(settings, proc, outcome, group, scratch)
        return Phase(outcome, proc.returncode, _tail(stderr), relay.stdout_tail, policy.stages,
                     policy.trusted, policy.said, deadline)


def _start(
    stack: contextlib.ExitStack,
    settings: WorkerSettings,
    scratch: Path,
    argv: Callable[[str], list[str]],
    group: JobCgroup | None,
    warm: WarmWorker | None,
) -> tuple[subprocess.Popen[bytes], IO[bytes], int]:
    """The phase's process (the warm one handed its command, or a cold one started now), the
    file of its stderr (closed with `stack`) and the read end of its event channel."""
    if warm is not None:
        stack.callback(warm.stderr.close)
        warm.hand(argv(warm.view)[1:])
        return warm.proc, warm.stderr, warm.events_r
    stderr = stack.enter_context(tempfile.TemporaryFile())
    proc, events_r = _start_cold(settings, scratch, argv, group, stderr)
    return proc, stderr, events_r


def _stop_phase(settings: WorkerSettings, proc: subprocess.Popen[bytes], outcome: Outcome,
                group: JobCgroup | None, scratch: Path) -> None:
    """After `done` or EOF the worker is exiting on its own: give it a moment (so its exit
    status, e.g. a signal, is its own); after a limit, kill at once. Then whatever it
    started."""
    stop(proc, settings.grace_s if outcome.reason is None else 0.0)
    if group is not None:
        group.kill()
    if not settings.isolation.bubblewrap:
        kill_strays(scratch)


def _start_cold(
    settings: WorkerSettings,
    scratch: Path,
    argv: Callable[[str], list[str]],
    group: JobCgroup | None,
    stderr: IO[bytes],
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a sandboxed process now; returns it and the read end of its event channel."""
    iso = settings.isolation
    procs = group.procs if group is not None else []
    with event_channel(iso) as (events_r, events_w, seccomp_fd):
        launch = make_launch(iso, lambda view: wrapped_argv(argv(view), events_w), scratch,
                             settings.spec, settings.limits, settings.repo_dir, procs,
                             seccomp_fd)
        proc = launch.start(subprocess.DEVNULL, stderr, events_w)
    return proc, events_r


def _await_start(warm: WarmWorker | None, job: Job, deadline: float | None,
                 wall_s: float) -> tuple[Outcome, float]:
    """A worker still warming up waited for, and the phase's deadline: `deadline`, or
    `wall_s` from when the worker is ready."""
    outcome = _await_ready(warm, job) if warm is not None and warm.ready_at is None else Outcome()
    return outcome, deadline if deadline is not None else time.monotonic() + wall_s


def _await_ready(warm: WarmWorker, job: Job) -> Outcome:
    """Wait for a warming worker's ready line (on its event channel, before any event),
    saying so in a `waiting` event once it has waited WARM_QUIET_S (a back half that warmed
    while its front ran is ready by then) and about every WAIT_TICK_S after."""
    end = time.monotonic() + WARM_TIMEOUT_S
    told = time.monotonic() - WAIT_TICK_S + WARM_QUIET_S
    while time.monotonic() < end:
        if job.cancel_requested():
            return Outcome(reason="cancelled")
        if time.monotonic() - told >= WAIT_TICK_S:
            told = time.monotonic()
            job.publish("waiting", waiting_for_warm_up(warm, time.time() - job.created),
                        origin="server")
        ready, _, _ = select.select([warm.events_r], [], [], 0.1)
        if ready:
            got = os.read(warm.events_r, len(READY))
            return Outcome() if got == READY else Outcome(reason="warm")
    return Outcome(reason="warm")


def waiting_for_warm_up(warm: WarmWorker, waited_s: float) -> dict[str, Any]:
    """The `waiting` payload of a job handed a worker that is still warming up."""
    started = time.monotonic() - warm.spawned
    return {"on": "warm-up", "waited_s": round(waited_s, 1),
            "message": f"waiting for a worker to warm up (it started {started:.1f} s ago: "
                       "it imports torch and compiles a small snippet once)"}


def conclude(
    job: Job,
    store: Store,
    phase: Phase,
    settings: WorkerSettings,
    group: JobCgroup | None,
    stdout: str = "",
    follow: FollowUps | None = None,
) -> None:
    """Finish the job from the phase that ended it: its `done`, or an error saying why not.
    When `done` went out already (`follow`), the follow-ups it left are stored instead."""
    sig = exit_signal(phase.returncode, settings.isolation)
    if follow is not None and follow.closed:
        stopped = None
        if phase.outcome.done is None:  # stopped before the compiler's own `done`
            oom = group is not None and group.oom_killed()
            stopped = str(explain(phase.outcome.reason, sig, phase.stderr, job,
                                  settings.limits, oom=oom, stage=follow.stages[0])["message"])
        follow.end(stopped)
        return
    if phase.outcome.done is not None and job.events:
        Quiet(job, settings.quiet_s).say("the result is complete; the server stores its trace")
        finish(job, store, phase.outcome.done, stdout, "compiler" if phase.trusted else "snippet")
        return
    # A compiler that reported its own error and then died already said what went wrong;
    # only one error event precedes `done`.
    if not any(envelope(e).stage == "error" for e in job.events):
        oom = group is not None and group.oom_killed()
        stage = next((s for s in reversed(phase.stages) if s not in ("error", "done")), None)
        why = explain(phase.outcome.reason, sig, phase.stderr, job, settings.limits,
                      oom=oom, stage=stage)
        job.publish("error", why, origin="server")
    finish(job, store, {"ok": False}, stdout)


def _hand_over(job: Job, jobdir: JobDir, iso: Isolation, limits: Limits) -> bool | None:
    """The bundle and the submitted code into the back half's directory: True; False when
    the front wrote no bundle; None when the job's scratch (one tmpfs for both halves) is
    too full to take them (ENOSPC, EDQUOT: the snippet filled it)."""
    try:
        if not take_bundle(jobdir, iso, limits):
            return False
        _write_snippet(job, jobdir.phase("back"), iso)  # what kernel comments quote
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return None
        raise
    return True


def take_bundle(jobdir: JobDir, iso: Isolation, limits: Limits) -> bool:
    """Copy the front half's bundle into the back half's directory, if it wrote one.

    The server reads it itself, never following a link and never more than the scratch
    budget, so nothing the snippet left in its directory can reach the back half but this
    one regular file.
    """
    source = jobdir.phase("front") / BUNDLE
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limits.scratch_mb * MiB:
            return False
        target = jobdir.phase("back") / BUNDLE
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            while chunk := os.read(fd, 1 << 20):
                os.write(out, chunk)
        finally:
            os.close(out)
        if iso.uid is not None:
            os.chown(target, iso.uid, iso.gid if iso.gid is not None else -1)
        return True
    finally:
        os.close(fd)


def _write_snippet(job: Job, scratch: Path, iso: Isolation) -> None:
    path = scratch / SNIPPET
    path.write_text(job.request.code, encoding="utf-8")
    if iso.uid is not None:
        os.chown(path, iso.uid, iso.gid if iso.gid is not None else -1)


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


def _tail(stderr: IO[bytes]) -> str:
    stderr.seek(0, os.SEEK_END)
    size = stderr.tell()
    stderr.seek(max(0, size - STDERR_TAIL))
    return stderr.read().decode("utf-8", errors="replace").strip()
