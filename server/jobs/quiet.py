"""The server's own word when a running worker goes quiet: a user is never left in silence.

In: a running job and what its current process has said. Out: a `progress` event from the
server (origin "server") whenever the job's stream has been quiet for QUIET_S while the
relay waits on the worker, and one before the server stores a finished trace. The compiler
says what a long stage does every 0.4 s (compiler/progress.py), but a worker starved of
the CPU on a loaded host, or inside C code that holds the GIL (AOTAutograd's trace of a
training step), went 1.1-1.8 s without a word, and storing a training step's trace took
the server 0.7 s at load 20.

The server quotes no worker: a front half's words are the snippet's, so this event names
only the stage the job is in (the back half's stage as the compiler said it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelscope.compiler.events.read import Event, envelope, field_of
from kernelscope.compiler.events.stage import STAGES
from kernelscope.compiler.events.types import Progress
from kernelscope.server.jobs.manager import Job

Sink = Callable[[str, dict[str, Any], float], None]  # a relay's sink: stage, data, ms
QUIET_S = 0.5  # the relay looks every 0.1 s: a quiet worker heard of within about 0.6 s


@dataclass
class Quiet:
    """Watches one phase of a job: `heard` each event the process sends, `check` often."""

    job: Job
    after_s: float = QUIET_S  # 0: the server never speaks for a quiet worker
    trusted: bool = False  # the back half: its own `progress` names the stage it runs
    stage: str = "source"  # the stage the job is in, as far as the server knows

    def __post_init__(self) -> None:
        for event in self.job.events:  # a later phase starts where the job is
            self._past(envelope(event).stage)

    def _past(self, stage: str) -> None:
        """`stage`'s event is out: the next stage runs (after the last, it is still said)."""
        if stage in STAGES:
            self.stage = STAGES[min(STAGES.index(stage) + 1, len(STAGES) - 1)]

    def heard(self, stage: str, data: dict[str, Any]) -> None:
        """One event the process sent; a front's words are the snippet's and name nothing
        here but its `source`."""
        said = field_of(Event(-1, stage, 0.0, data), Progress, "stage")
        if stage == "progress" and self.trusted and said in STAGES:
            self.stage = said
        elif self.trusted or stage == "source":
            self._past(stage)

    def hearing(self, sink: Sink) -> Sink:
        """`sink`, after this watch has `heard` each event it is given."""
        def heard_then(stage: str, data: dict[str, Any], ms: float) -> None:
            self.heard(stage, data)
            sink(stage, data, ms)

        return heard_then

    def check(self) -> None:
        """The server's `progress` if the stream has been quiet for `after_s`."""
        quiet = time.monotonic() - self.job.last_at
        if self.after_s > 0 and quiet >= self.after_s:
            self.say("still running", f"no word from the worker for {quiet:.1f} s")

    def say(self, doing: str, why: str = "") -> None:
        if self.after_s <= 0 or self.job.finished:
            return
        message = f"{self.stage}: {doing}" + (f" ({why})" if why else "")
        try:
            self.job.publish("progress", {"stage": self.stage, "doing": doing,
                                          "message": message, "stage_s": 0.0},
                             origin="server")
        except RuntimeError:  # finished meanwhile
            pass
