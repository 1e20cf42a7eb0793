"""A job phase's policy: which of a sandboxed process's stages go into the job, with what
origin, and when the job's `done` goes out ahead of its follow-ups.

In: each event the relay reads from one process (server/jobs/relay.py). Out: the events
published on the `Job`, and what the process said (its stages, in order) for the runner
(server/jobs/worker.py) to conclude from. Three policies, one per kind of process:

- the front half of a split job (`front`): it ran the snippet, so nothing it says is the
  compiler's; only `source` and the captured graphs are streamed as they come (the back
  half replays the rest from the bundle); its front stages are kept for the runner.
- the back half (`back`): our code alone; every event is published, with the origin its
  stage gives it (server/jobs/trust.py).
- a whole pipeline in one process (`whole`, a custom WORKER_CMD): every event is
  published, all of them the snippet's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernelscope.server.jobs.followups import FollowUps
from kernelscope.server.jobs.manager import Job
from kernelscope.server.jobs.trust import StageOrigin, conform_payload

FRONT_STAGES = ("source", "capture_graph", "capture", "error")
# What a split front says that is published the moment it arrives (the snippet's words,
# conformed): `source`, each graph as Dynamo captures it, and what capture is doing
# (`progress`). The back half then replays only `capture` (the graphs re-rendered from
# the bundle it compiles).
LIVE_FRONT = ("source", "capture_graph", "progress")


@dataclass
class PhasePolicy:
    """What one phase's events become. `publish`: every event goes into the job; `live`:
    stages published as they arrive though the phase does not publish; `trusted`: the back
    half (origins by stage); `follow`: the job's follow-ups, closed (`done`) once our own
    result is published, with `stdout` (the snippet's fd 1, else this process's)."""

    job: Job
    name: str  # the phase's directory in the job's: "front" or "back"
    publish: bool
    trusted: bool = False
    live: tuple[str, ...] = ()
    follow: FollowUps | None = None
    stdout: str | None = None
    stages: list[str] = field(default_factory=list)  # the stages it reported, in order
    said: list[tuple[str, dict[str, Any], float]] = field(default_factory=list)
    by_stage: StageOrigin = field(default_factory=StageOrigin)
    deadline: float | None = None  # the job's wall clock, once the process runs
    own_stdout: Callable[[], str] = lambda: ""  # the tail of this process's fd 1

    @classmethod
    def front(cls, job: Job) -> PhasePolicy:
        return cls(job, "front", publish=False, live=LIVE_FRONT)

    @classmethod
    def back(cls, job: Job, follow: FollowUps | None, stdout: str) -> PhasePolicy:
        return cls(job, "back", publish=True, trusted=True, follow=follow, stdout=stdout)

    @classmethod
    def whole(cls, job: Job, follow: FollowUps | None) -> PhasePolicy:
        return cls(job, "front", publish=True, follow=follow)

    def origin(self, stage: str, data: dict[str, Any]) -> str:
        return self.by_stage.origin(stage, data) if self.trusted else "snippet"

    def take(self, stage: str, data: dict[str, Any], ms: float) -> None:
        """One event read from the process (the relay's sink)."""
        follow = self.follow
        if follow is not None and follow.closed:
            follow.take(stage, data, ms, self.origin(stage, data))
            return
        # A front's one `source`, then its graphs: a second source (or a graph before the
        # first) is a line the snippet wrote itself, and stays out of the stream. What a
        # stage is doing (`progress`) may come before `source` (the snippet runs in it).
        streams = stage in self.live and (
            stage == "progress" or ("source" in self.stages) == (stage != "source"))
        # What else a front says is the snippet's; a heartbeat (`progress`) is no report.
        if (self.publish or stage in FRONT_STAGES) and stage != "progress":
            self.stages.append(stage)
            self.said.append((stage, data, ms))
        if self.publish or streams:
            origin = self.origin(stage, data)
            if stage in FRONT_STAGES or stage in self.live:
                data = conform_payload(stage, data, self.job.request)
            self.job.publish(stage, data, ms, origin=origin)
        if self.publish and follow is not None and follow.complete(stage):
            assert self.deadline is not None
            follow.close(self.own_stdout() if self.stdout is None else self.stdout,
                         "compiler" if self.trusted else "snippet", self.trusted,
                         self.deadline)
