"""Reading a running worker: its event channel, its stdout, and the limits on both.

In: a started worker with two pipes, the *event channel* (NDJSON StageEvents, one per line,
on a file descriptor the worker opened for our code only) and the worker's *stdout* (what
the snippet writes to fd 1: data, never events). Out: events published on the `Job` as
they arrive, and an `Outcome` saying why reading stopped (`done`, a limit, or EOF).

Limits enforced here: the wall clock, the scratch budget (polled), the worker's output
(both pipes together), the size of one event, the number of events and the trace as it
will be stored (its head, and each graph's part: server/store/parts.py `Tally`), so one
job can never make the server hold more than OUTPUT_LIMIT_MB for it.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kernelscope.compiler.events.read import Event, envelope
from kernelscope.server.jobs.inputs import parse_event_line
from kernelscope.server.jobs.manager import Job
from kernelscope.server.jobs.quiet import Quiet
from kernelscope.server.sandbox.launch import Limits
from kernelscope.server.store.parts import Tally, graph_bytes

MiB = 1 << 20
STDOUT_TAIL = 8000  # characters of the snippet's fd-1 output kept for the trace
OFF_LOOP_BYTES = 64 * 1024  # a line this long is parsed off the event loop (off_loop)
R = TypeVar("R")


def off_loop(fn: Callable[[bytes], R], line: bytes) -> R:
    """`fn(line)`, in a native thread of gevent's pool when this process is a gevent worker
    (`kernelscope serve`): parsing and checking megabytes of a worker's JSON took the event
    loop seconds (4 MiB of `0,0,...`: 2.6 s), every request of the web tier waiting; in the
    thread the interpreter switches to the loop every few milliseconds. Elsewhere, here."""
    try:
        from gevent import get_hub, monkey
    except ImportError:
        return fn(line)
    if not monkey.is_module_patched("threading"):
        return fn(line)
    result: R = get_hub().threadpool.apply(fn, (line,))
    return result


@dataclass(frozen=True)
class Outcome:
    """Why reading stopped: `done` arrived (its data), or a limit/EOF (reason)."""

    done: dict[str, Any] | None = None
    # "timeout", "output", "scratch", "event", "events", "trace" (its head), "part" (a
    # graph's), or None for EOF
    reason: str | None = None


@dataclass
class Channel:
    """One pipe from the worker: bytes not yet split into lines, and whether it closed."""

    fd: int
    pending: bytearray = field(default_factory=bytearray)
    closed: bool = False


def parse_event(line: bytes) -> Event[dict[str, Any]] | None:
    """A StageEvent from one NDJSON line (its stage, an object for its data, its ms), or
    None for anything else. Its data is someone else's words until the worker conforms it
    (server/jobs/trust.py), so it stays a dict here, not its stage's dataclass."""
    obj = parse_event_line(line)
    if obj is None:
        return None
    event = envelope(obj)
    if not event.stage or len(event.stage) > 40:
        return None
    data = event.data
    return Event(-1, event.stage, event.ms if event.ms >= 0 else 0.0,
                 data if isinstance(data, dict) else {"value": data})


def parse_sized(line: bytes) -> tuple[Event[dict[str, Any]] | None, dict[tuple[Any, str], int]]:
    """`parse_event`, and what the event adds to each graph's part (`graph_bytes`)."""
    event = parse_event(line)
    return event, ({} if event is None else graph_bytes(event.stage, event.data))


class Relay:
    """Moves one worker's events onto its Job, enforcing the limits above."""

    def __init__(
        self,
        job: Job,
        limits: Limits,
        normalize: Callable[[Event[dict[str, Any]], Limits], dict[str, Any]],
        sink: Callable[[str, dict[str, Any], float], None],
        scratch_over: Callable[[], bool],
        until_done: bool = True,
        quiet: Quiet | None = None,
    ) -> None:
        """`sink(stage, data, ms)` receives each accepted event (publishing it, or not).

        `until_done`: stop at the first `done`; otherwise (a process whose channel the
        snippet can write to) read on until the process closes it or a limit is hit.
        `quiet`: the server's own `progress` while the worker says nothing (quiet.py).
        """
        self.job, self.limits, self.normalize = job, limits, normalize
        self.sink = sink if quiet is None else quiet.hearing(sink)
        self.quiet = quiet
        self.until_done = until_done
        self.scratch_over = scratch_over
        self.read_bytes = 0
        self.count = len(job.events)
        self.tally = Tally(limits.trace_mb * MiB)
        for e in job.events:
            self.tally.line(len(json.dumps(e)))
            self.tally.event(graph_bytes(envelope(e).stage, envelope(e).data))
        self.stdout_tail = ""

    def run(self, events_fd: int, stdout_fd: int | None, deadline: float) -> Outcome:
        """Relay until `done`, both pipes closing, or a limit."""
        events = Channel(events_fd)
        stdout = Channel(stdout_fd) if stdout_fd is not None else Channel(-1, closed=True)
        next_check = time.monotonic() + 1.0
        while not events.closed:
            now = time.monotonic()
            if now >= deadline:
                return Outcome(reason="timeout")
            if self.job.cancel_requested():  # POST /api/jobs/<id>/cancel
                return Outcome(reason="cancelled")
            if now >= next_check:
                if self.scratch_over():
                    return Outcome(reason="scratch")
                next_check = now + 1.0
            fds = [c.fd for c in (events, stdout) if not c.closed]
            ready, _, _ = select.select(fds, [], [], min(0.1, deadline - now))
            if stdout.fd in ready:
                if (why := self._drain_stdout(stdout)) is not None:
                    return Outcome(reason=why)
            if events.fd in ready:
                result = self._read_events(events)
                if result is not None:
                    return result
            if self.quiet is not None:
                self.quiet.check()
        return Outcome()

    def _read(self, channel: Channel) -> bytes | None:
        """One chunk, or None once the pipe is closed; counts toward the output limit."""
        chunk = os.read(channel.fd, 1 << 16)
        if not chunk:
            channel.closed = True
            return None
        self.read_bytes += len(chunk)
        return chunk

    def _drain_stdout(self, channel: Channel) -> str | None:
        chunk = self._read(channel)
        if chunk is not None:
            text = chunk.decode("utf-8", errors="replace")
            self.stdout_tail = (self.stdout_tail + text)[-STDOUT_TAIL:]
        return "output" if self.read_bytes > self.limits.output_mb * MiB else None

    def _read_events(self, channel: Channel) -> Outcome | None:
        chunk = self._read(channel)
        if self.read_bytes > self.limits.output_mb * MiB:
            return Outcome(reason="output")
        if chunk is None:
            lines = [bytes(channel.pending)]
            channel.pending.clear()
        else:
            channel.pending += chunk
            cut = channel.pending.rfind(b"\n")
            if cut < 0:
                too_long = len(channel.pending) > self.limits.event_kb * 1024
                return Outcome(reason="event") if too_long else None
            lines = bytes(channel.pending[:cut]).split(b"\n")
            del channel.pending[: cut + 1]
        for line in lines:
            if len(line) > self.limits.event_kb * 1024:
                return Outcome(reason="event")
            if not line.strip():
                continue
            # Every line counts toward the caps before it is parsed: one a process may only
            # say to be ignored (a second `done`, from a channel the snippet can write) is
            # parsed all the same, and cost the web tier seconds uncounted.
            if not self.tally.line(len(line)):
                return Outcome(reason="trace")
            event, sizes = parse_sized(line) if len(line) < OFF_LOOP_BYTES \
                else off_loop(parse_sized, line)
            if event is None:
                continue
            if self.tally.event(sizes) is not None:
                return Outcome(reason="part")
            if event.stage == "done" and self.until_done:
                return Outcome(done=event.data)
            if self.count >= self.limits.events:
                return Outcome(reason="events")
            self.count += 1
            if event.stage != "done":
                self.sink(event.stage, self.normalize(event, self.limits), event.ms)
        return None
