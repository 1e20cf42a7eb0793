"""Heartbeats of a long stage: a `progress` event whenever the stream has been quiet for
QUIET_S while a stage runs, saying what the stage is doing.

In: the stage that begins and ends (`stage`), what it is doing as it goes (`doing`: the
Dynamo graph AOTAutograd traces, the library g++ builds, the graph being timed), and a
function that sends one event. Out: `progress` events (compiler/events/results.py
Progress) from a thread of their own, so a reader hears from a stage at least every
QUIET_S + TICK_S seconds however long it runs (a model's capture runs tens of seconds in
torch's code, which says nothing). Only between `begin` and `end`: every other event of
the stream is made on the caller's thread outside a stage, or sent through `send`, so
the events keep their order and their numbers.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from kernelscope.compiler.events import types as ev

QUIET_S = 0.4  # a stream quiet this long while a stage runs hears a `progress` event
TICK_S = 0.1  # how often the thread looks
LIMIT = 400  # progress events of one process at most (a job's event count is capped)


class Heartbeat:
    """One stream's heartbeat. `emit` makes and sends one `progress` event; None: nobody
    reads the stream as it goes (a pipeline whose events are taken at the end), and the
    heartbeat does nothing."""

    def __init__(self, emit: Callable[[ev.Progress], None] | None,
                 quiet_s: float = QUIET_S) -> None:
        self.emit, self.quiet_s = emit, quiet_s
        self.lock = threading.Lock()
        self.stage_name: str | None = None
        self.what = ""
        self.counted: tuple[int, int] | None = None
        self.began = self.last = time.monotonic()
        self.sent_count = 0
        self.thread: threading.Thread | None = None

    def begin(self, stage: str, doing: str = "") -> None:
        with self.lock:
            self.stage_name, self.what, self.counted = stage, doing, None
            self.began = self.last = time.monotonic()
        if self.emit is not None and self.thread is None:
            self.thread = threading.Thread(target=self._run, name="kernelscope-heartbeat",
                                           daemon=True)
            self.thread.start()

    def end(self) -> None:
        """The stage is over: nothing is sent for it after this returns."""
        with self.lock:
            self.stage_name = None

    @contextlib.contextmanager
    def stage(self, name: str, doing: str = "") -> Iterator[None]:
        self.begin(name, doing)
        try:
            yield
        finally:
            self.end()

    def doing(self, what: str, done: int | None = None, total: int | None = None) -> None:
        """What the stage does now (any thread may say so); `done` of `total` steps."""
        self.what = what
        self.counted = (done, total) if done is not None and total is not None else None

    def send(self, fn: Callable[[], None]) -> None:
        """Send an event of the stage's own from inside it (a captured graph): in order
        with the heartbeat's, and the quiet time starts again."""
        with self.lock:
            fn()
            self.last = time.monotonic()

    def _run(self) -> None:
        while self.sent_count < LIMIT:
            time.sleep(TICK_S)
            with self.lock:
                now = time.monotonic()
                if self.stage_name is None or now - self.last < self.quiet_s:
                    continue
                assert self.emit is not None
                self.emit(self.progress(now))
                self.last = now
                self.sent_count += 1

    def progress(self, now: float) -> ev.Progress:
        stage, what, took = self.stage_name or "", self.what, now - self.began
        done, total = self.counted or (None, None)
        count = f" [{done}/{total}]" if total else ""
        message = f"{stage}: {what}{count} ({took:.1f} s)" if what else \
            f"{stage} ({took:.1f} s)"
        return ev.Progress(stage, what, message, round(took, 2), done, total)
