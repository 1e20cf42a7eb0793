"""Follow-ups: stages that run after a job's `done` (the Inductor comparison).

In: a job whose options ask for a follow-up stage (`inductor`: true), and the worker's
events as they arrive. Out: `done` (and so the permalink) the moment our own result is
complete, that is once `profile` (the last stage before the follow-ups) is published;
each follow-up's event then goes to the stored trace as it arrives, after `done`
(Store.add_follow_up). A follow-up that cannot finish (the worker crashed, timed out, was
stopped, or sent an `error`) is stored all the same, as the stage's own "did not finish"
payload, so a stored trace never waits for an event that will not come.

The job's stream ends at `done`; readers learn of follow-ups from the trace:
`done.data.follow_ups` lists them and `follow_ups_until` says by when each is stored
(the job's wall clock plus a grace); `states` answers "running", "done" or, past that
time without its event (the server stopped mid-way), "lost". GET
/api/traces/<id>/follow-ups serves exactly that (docs/server.md, "Follow-ups").

The follow-up runs in the job's own worker process and slot, under the job's limits: it
is the same back half, asked for one more stage.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kernelscope.compiler.events.read import data_as, envelope, field_of
from kernelscope.compiler.events.stage import FOLLOW_UPS, PARTS, SCHEMA_VERSION, STAGES, TERMINAL
from kernelscope.compiler.events.types import Error, JobDone, Run
from kernelscope.compiler.follow_ups import follow_ups
from kernelscope.compiler.options import CompileOptions
from kernelscope.server.jobs.finish import finish
from kernelscope.server.jobs.manager import Job
from kernelscope.server.store.rows import Store

log = logging.getLogger(__name__)
# Our own result is complete once this stage is published (profile).
OWN_LAST = [s for s in STAGES if s not in (*FOLLOW_UPS, *PARTS, *TERMINAL)][-1]
GRACE_S = 30.0  # past the job's wall clock: stopping the worker and storing the event

def asked(options: dict[str, Any]) -> list[str]:
    """The follow-up stages a job's options ask for, in the compiler's own rule
    (compiler/follow_ups.py: `inductor` by its option, `gpu_stages` where Triton runs
    under its interpreter with a gpu_target)."""
    try:
        return follow_ups(CompileOptions.from_mapping(options))
    except (TypeError, ValueError):  # options the API did not check: what they name
        return [stage for stage in FOLLOW_UPS if options.get(stage)]


def did_not_finish(stage: str, why: str) -> dict[str, Any]:
    """A follow-up's payload when it ended without its own event (its type's required
    fields, `error` saying why)."""
    if stage == "inductor":
        return {"measured": False, "code": [], "kernels": [], "device": "",
                "inductor_ms": None, "reason": "TorchInductor did not finish", "error": why}
    if stage == "gpu_stages":
        return {"graphs": [], "error": why}
    return {"error": why}


def states(trace: dict[str, Any], now: float | None = None) -> dict[str, str]:
    """Each follow-up a stored trace's `done` lists: "done" (its event is stored),
    "running", or "lost" (past `follow_ups_until` without it)."""
    events = [envelope(e) for e in trace.get("events") or []]
    at = next((i for i, e in enumerate(events) if e.stage == "done"), None)
    done = data_as(events[at], JobDone) if at is not None else None
    listed = (done.follow_ups if done is not None else None) or []
    until = done.follow_ups_until if done is not None else None
    now = time.time() if now is None else now
    have = {e.stage for e in events[at + 1:]} if at is not None else set()
    return {stage: "done" if stage in have
            else "lost" if isinstance(until, (int, float)) and now > until else "running"
            for stage in listed if isinstance(stage, str)}


class FollowUps:
    """One job's follow-ups: when to close the job early, and where their events go.

    Closing publishes the job's `done` through server/jobs/finish.py, with the follow-ups
    to list: nothing is handed down to be called back.
    """

    def __init__(self, job: Job, store: Store, stages: list[str]) -> None:
        self.job, self.store, self.stages = job, store, stages
        self.closed = False  # `done` went out; what follows is stored, never published
        self.stored: list[str] = []

    def complete(self, stage: str) -> bool:
        """Is our own result complete once `stage` is published (and nothing failed)?"""
        return (not self.closed and stage == OWN_LAST
                and not any(envelope(e).stage == "error" for e in self.job.events))

    def close(self, stdout: str, origin: str, isolated: bool, deadline: float) -> None:
        """Publish `done` now. Its `ok` follows the compiler's own rule (ev.Done: every
        stage ran and `run` matched eager), read from the `run` event already published.
        `deadline`: the job's wall clock (monotonic)."""
        run = next((e for e in map(envelope, self.job.events) if e.stage == "run"), None)
        ok = run is not None and field_of(run, Run, "ok") is True
        until = round(time.time() + max(0.0, deadline - time.monotonic()) + GRACE_S, 1)
        self.job.following = True
        self.closed = True
        finish(self.job, self.store, {"ok": ok, "isolated": isolated}, stdout, origin,
               self.stages, until)

    def take(self, stage: str, data: dict[str, Any], ms: float, origin: str) -> None:
        """An event after `done`: a follow-up's own is stored; an `error` (the compiler
        failed in a follow-up stage) stores the pending ones as not finished; anything
        else is not a follow-up and is dropped."""
        if stage == "error":
            said = field_of(envelope({"stage": stage, "data": data}), Error, "message")
            self.end(str(said or "the compiler reported an error"))
        elif stage in self.stages and stage not in self.stored:
            self._store(stage, data, ms, origin)

    def end(self, why: str | None) -> None:
        """The worker is over: every follow-up not stored yet is stored as not finished
        (`why`: what stopped it; None: the worker ended without sending it)."""
        for stage in self.stages:
            if stage not in self.stored:
                reason = why or "the worker ended without sending it"
                self._store(stage, did_not_finish(stage, reason), 0.0, "server")
        self.job.following = False

    def _store(self, stage: str, data: dict[str, Any], ms: float, origin: str) -> None:
        self.stored.append(stage)
        done = envelope(self.job.done_event) if self.job.done_event is not None else None
        said = data_as(done, JobDone) if done is not None else None
        trace_id = said.trace_id if said is not None else None
        if done is None or not trace_id:  # the trace was never stored: nothing to append to
            return
        event = {"schema": SCHEMA_VERSION, "seq": done.seq + len(self.stored),
                 "stage": stage, "ms": ms, "data": data, "origin": origin}
        try:
            self.store.add_follow_up(trace_id, event)
        except Exception:
            log.exception("job %s: could not store its %s follow-up", self.job.id, stage)
