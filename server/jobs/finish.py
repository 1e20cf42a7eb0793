"""A job's end: its trace stored, then `done` published with the permalink.

In: a job whose events are complete (or whose follow-ups are still to come) and the store.
Out: the stored trace's id in the `done` event, with the wall time next to the stage
times. The runner (server/jobs/worker.py), the follow-ups (server/jobs/followups.py) and
the RQ worker all end a job here.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kernelscope.compiler.events.read import envelope, read_data
from kernelscope.compiler.events.stage import PARTS, SCHEMA_VERSION
from kernelscope.compiler.events.types import JobDone
from kernelscope.server.jobs.manager import Job
from kernelscope.server.store.rows import Store

log = logging.getLogger(__name__)


def finish(
    job: Job, store: Store, done: dict[str, Any], stdout: str = "", origin: str = "server",
    follow_ups: list[str] | None = None, until: float | None = None,
) -> None:
    """Store the trace, then publish `done` with its trace_id.

    `stdout` is what the snippet wrote to fd 1 (its tail): shown as data, never parsed.
    `origin`: who said the job was done ("compiler", "snippet", or the "server" itself).
    `follow_ups`: the stages still to come, appended to the stored trace by `until`.
    """
    said = read_data(JobDone, done)
    ok = said is not None and bool(said.ok) and \
        not any(envelope(e).stage == "error" for e in job.events)
    data = {**done, "ok": ok, **timing(job)}
    data.pop("trace_id", None)
    if stdout:
        data["snippet_stdout"] = stdout
    if follow_ups:
        data["follow_ups"], data["follow_ups_until"] = follow_ups, until
    closing = {"schema": SCHEMA_VERSION, "seq": len(job.events), "stage": "done", "ms": 0.0,
               "data": data, "origin": origin}
    try:
        opts = job.request.trace_options()
        data["trace_id"] = store.put(job.request.code, opts, [*job.events, closing], ok)
    except Exception:
        log.exception("job %s: could not store the trace", job.id)
        data["store_error"] = "the trace could not be stored"
    job.publish("done", data, origin=origin)


def timing(job: Job) -> dict[str, float]:
    """Wall time from the request to `done` (what the user waited) next to the sum of the
    stage times the compiler reported (what it spent compiling)."""
    # A captured graph's `ms` is time within `capture`, already counted there.
    stages = sum(e.ms for e in map(envelope, job.events) if e.stage not in PARTS)
    return {"wall_ms": round((time.time() - job.created) * 1000, 1), "stages_ms": round(stages, 1)}
