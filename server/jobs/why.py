"""Why a job or a follow-up stopped, in words: the `error` event of a worker that ended
without `done` (a timeout, a signal, memory, a limit, a cancel).

In: how reading the worker ended (server/jobs/relay.py's Outcome reason), its exit signal, the
tail of its stderr, the job and its limits. Out: the `error` event's payload.
"""

from __future__ import annotations

import signal
from typing import Any

from kernelscope.compiler.events.read import Event, field_of
from kernelscope.compiler.events.types import Error
from kernelscope.server.jobs.manager import Job
from kernelscope.server.sandbox.launch import Isolation, Limits

MAX_SCRATCH_FILES = 20000
SIGNAL_NAMES: dict[int, str] = {
    signal.SIGSEGV: "SIGSEGV (segmentation fault)",
    signal.SIGBUS: "SIGBUS (bus error)",
    signal.SIGILL: "SIGILL (illegal instruction)",
    signal.SIGFPE: "SIGFPE (arithmetic fault)",
    signal.SIGABRT: "SIGABRT (abort)",
    signal.SIGKILL: "SIGKILL",
    signal.SIGTERM: "SIGTERM",
}


def normalize(event: Event[dict[str, Any]], limits: Limits) -> dict[str, Any]:
    """An `exception` error that is really the memory limit says so."""
    data = event.data
    message = str(field_of(event, Error, "message") or "")
    if field_of(event, Error, "kind") == "exception" and "MemoryError" in message:
        return {**data, "kind": "memory", "message": f"{_memory_message(limits)} ({message})"}
    return data


def cancelled(job: Job, stage: str | None = None) -> dict[str, Any]:
    stage = stage or job.last_stage or "source"
    why = job.cancel_reason or "Cancelled"
    return {
        "stage": stage,
        "kind": "cancelled",
        "message": f"{why} during the {stage} stage" if job.events else why,
        "line": None,
        "traceback": None,
    }


def exit_signal(returncode: int | None, iso: Isolation) -> int | None:
    """The signal that killed the worker (bubblewrap reports it as 128 + signal)."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if iso.bubblewrap and 128 < returncode < 128 + 65:
        return returncode - 128
    return None


def _memory_message(limits: Limits) -> str:
    return f"Out of memory: the job went over its {limits.memory_mb} MiB memory limit"


def _stopped_by_us(reason: str | None, limits: Limits, during: str) -> tuple[str, str] | None:
    """(kind, message) when the server stopped the worker for `reason`, else None."""
    if reason == "warm":
        return "sandbox", "The warm worker for this job did not start; try again"
    if reason == "timeout":
        return "timeout", (
            f"Timed out: the job ran longer than {limits.wall_s:g} s ({during}) and was stopped"
        )
    if reason == "output":
        return "sandbox", f"Stopped: the job printed more than {limits.output_mb} MiB of output"
    if reason in ("event", "events", "trace", "part"):
        what = {
            "event": f"an event larger than {limits.event_kb} KiB",
            "events": f"more than {limits.events} events",
            "trace": f"a trace whose head (its events but its graphs) is larger than "
                     f"{limits.trace_mb} MiB (TRACE_LIMIT_MB)",
            "part": f"a graph larger than {limits.trace_mb} MiB (TRACE_LIMIT_MB: a big "
                    "trace is stored one graph at a time, each within it)",
        }[reason]
        return "sandbox", f"Stopped: the worker sent {what} ({during})"
    if reason == "scratch":
        return "sandbox", (
            f"Stopped: the job wrote more than {limits.scratch_mb} MiB or "
            f"{MAX_SCRATCH_FILES} files to its scratch directory"
        )
    return None


def _stopped_by_exit(
    sig: int | None, stderr: str, limits: Limits, oom: bool, during: str
) -> tuple[str, str]:
    """(kind, message) from how the worker ended: its signal, the cgroup, its stderr."""
    if sig == signal.SIGXCPU:
        return "timeout", (
            f"Timed out: the job used more than {limits.cpu_s} s of CPU time ({during})"
        )
    if sig == signal.SIGXFSZ:
        return "sandbox", f"Stopped: the job wrote a file larger than {limits.file_mb} MiB"
    if oom:
        return "memory", (
            f"{_memory_message(limits)} (shared memory and tmpfs included; {during})"
        )
    if "MemoryError" in stderr or "std::bad_alloc" in stderr:
        return "memory", _memory_message(limits)
    if sig == signal.SIGKILL:
        return "killed", (
            f"The worker was killed by SIGKILL {during} (most likely out of memory)"
        )
    if sig is not None:
        name = SIGNAL_NAMES.get(sig, f"signal {sig}")
        return "killed", (
            f"The worker crashed with {name} {during}: the snippet or a generated kernel "
            "touched memory it must not"
        )
    if stderr.startswith("bwrap:"):
        return "sandbox", f"The sandbox could not start: {stderr.splitlines()[0]}"
    last = stderr.splitlines()[-1] if stderr else "no output"
    return "exception", f"The worker stopped {during} without finishing: {last}"


def explain(
    reason: str | None,
    sig: int | None,
    stderr: str,
    job: Job,
    limits: Limits,
    oom: bool = False,
    stage: str | None = None,
) -> dict[str, Any]:
    """The `error` event for a worker that stopped without `done`.

    `oom`: the job's memory cgroup killed it; `stage`: the last stage the stopped process
    reported (else the job's last published stage).
    """
    stage = stage or job.last_stage or "source"
    if reason == "cancelled":
        return cancelled(job, stage)
    during = f"during the {stage} stage"
    kind, message = _stopped_by_us(reason, limits, during) or \
        _stopped_by_exit(sig, stderr, limits, oom, during)
    return {"stage": stage, "kind": kind, "message": message, "line": None, "traceback": stderr}
