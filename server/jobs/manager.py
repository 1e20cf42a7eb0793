"""Compile jobs: their event logs, the bounded queue, and the supervisor threads.

In: a validated `JobRequest` from `POST /api/compile`. Out: a `Job` whose events grow as
the worker reports stages; any number of subscribers read them (late ones get a replay).

Threads here only supervise subprocesses: `MAX_JOBS` threads take jobs from a queue of
`QUEUE_SIZE` and hand each to the runner (server/jobs/worker.py), which starts the sandboxed
worker and publishes what it prints. A full queue is answered "busy, try again"; a client
that already holds `CLIENT_JOBS` queued or running jobs is answered 429 with
`Retry-After`, so one client's endless loops never take every slot. A finished job keeps
only its `done` event in memory: its events are read back from the store (a padded trace
is megabytes; 200 of them were gigabytes).
`stop(reason)` ends every job (a graceful shutdown): each stream gets an `error` and
`done`, each trace is stored (a follow-up still running is stored as stopped), each
sandbox, job directory and cgroup removed.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelscope.compiler.events.read import data_as, envelope
from kernelscope.compiler.events.stage import (  # the one definition (torch-free)
    SCHEMA_VERSION,
    TERMINAL,
)
from kernelscope.compiler.events.types import JobDone
from kernelscope.server.jobs.kcache import KernelCache
from kernelscope.server.jobs.pool import WarmPool

MAX_FINISHED_JOBS = 200
WAIT_TICK_S = 0.8  # a waiting job hears how it stands within a second
log = logging.getLogger(__name__)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    last = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{last}"


def waiting_for_slot(busy: int, position: int, waited_s: float) -> dict[str, Any]:
    """The `waiting` payload of a queued job (compiler/events/results.py Waiting)."""
    return {"on": "slot", "busy": busy, "position": position, "waited_s": round(waited_s, 1),
            "message": f"waiting for a worker: {busy} busy, you are {ordinal(position)}"}


class Busy(Exception):
    """The queue is full."""


class QueueUnavailable(Exception):
    """The job queue cannot be reached (Redis down): what `stats` raises, saying why."""


class OverQuota(Exception):
    """This client already holds its share of jobs; `retry_after_s` says when to retry."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TraceReader(Protocol):
    def get(self, ident: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class JobRequest:
    code: str
    options: dict[str, Any]  # device, backend, fusion, inductor (validated by the API)
    entry: str | None = None

    def trace_options(self) -> dict[str, Any]:
        """What the permalink stores next to the code."""
        out = dict(self.options)
        if self.entry is not None:
            out["entry"] = self.entry
        return out


@dataclass
class Job:
    """One compile: its request and the events published so far (the log only grows)."""

    id: str
    request: JobRequest
    created: float = field(default_factory=time.time)
    state: str = "queued"  # queued, running, finished
    client: str = ""  # who submitted it (the per-client quota)
    listeners: int = 0
    finished_at: float | None = None
    cancel_reason: str | None = None  # why it was stopped, if not by its own client
    following: bool = False  # `done` is out, its follow-ups still run (server/jobs/followups.py)
    last_at: float = field(default_factory=time.monotonic)  # when an event was last published
    _events: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _archive: tuple[TraceReader, str, int] | None = field(default=None, repr=False)
    _done: dict[str, Any] | None = field(default=None, repr=False)
    _cond: threading.Condition = field(default_factory=threading.Condition, repr=False)
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event so far; a finished, archived job reads them from the store."""
        if self._archive is None:
            return self._events
        store, trace_id, count = self._archive
        trace = store.get(trace_id)
        if trace is None:  # the store lost it: the `done` event is all there is
            return [self._done] if self._done is not None else []
        return list(trace["events"])[:count]  # the job's stream: through `done`

    def archive(self, store: TraceReader) -> bool:
        """Drop the events from memory once the store holds them (True if it did)."""
        with self._cond:
            done = data_as(envelope(self._done), JobDone) if self._done is not None else None
            if done is None or not done.trace_id or done.store_error:
                return False
            self._archive = (store, str(done.trace_id), len(self._events))
            self._events = []
            return True

    def cancel(self, reason: str | None = None) -> bool:
        """Ask for the job to be stopped (the supervisor kills its worker); False when it
        has already finished. `reason`: said in the error event instead of "Cancelled"."""
        if self.finished:
            return False
        if reason is not None:
            self.cancel_reason = reason
        self._cancel.set()
        return True

    def stop_following(self, reason: str) -> None:
        """Stop the follow-ups of a job whose `done` is out (a graceful shutdown)."""
        self.cancel_reason = reason
        self._cancel.set()

    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def publish(
        self, stage: str, data: dict[str, Any], ms: float = 0.0, origin: str | None = None
    ) -> dict[str, Any]:
        """Append one event (seq is assigned here) and wake every subscriber.

        `origin` says which process produced the event (docs/server.md, "Trust"): "snippet"
        for one that also ran the user's code, "compiler" for our code alone.
        """
        with self._cond:
            if self.finished:
                raise RuntimeError(f"job {self.id} already finished")
            event = {
                "schema": SCHEMA_VERSION,
                "seq": len(self._events),
                "stage": stage,
                "ms": ms,
                "data": data,
            }
            if origin is not None:
                event["origin"] = origin
            self._events.append(event)
            self.last_at = time.monotonic()
            if stage == "done":
                self.state = "finished"
                self.finished_at = time.time()
                self._done = event
            self._cond.notify_all()
        # Under gevent (`kernelscope serve`) every job and stream is a greenlet of one
        # thread: let the woken streams send the event now, before the publisher's next
        # work (storing the trace, sharing its kernels) holds the loop for tenths of a second.
        time.sleep(0)
        return event

    @property
    def finished(self) -> bool:
        return self._done is not None

    @property
    def done_event(self) -> dict[str, Any] | None:
        return self._done

    @property
    def count(self) -> int:
        return self._archive[2] if self._archive is not None else len(self._events)

    @property
    def last_stage(self) -> str | None:
        stages = [s for s in (envelope(e).stage for e in self._events) if s not in TERMINAL]
        return stages[-1] if stages else None

    def set_state(self, state: str) -> None:
        with self._cond:
            self.state = state
            self._cond.notify_all()

    def wait(self, start: int, timeout: float) -> tuple[list[dict[str, Any]], bool]:
        """Events from index `start` on (waiting up to `timeout` for some), and finished?"""
        with self._cond:
            if self.count <= start and not self.finished:
                self._cond.wait(timeout)
            if self._archive is None:
                return self._events[start:], self.finished
        return self.events[start:], True  # archived: read from the store, outside the lock

    def subscribe(self, start: int, heartbeat_s: float) -> Iterator[dict[str, Any] | None]:
        """Yield events from `start` until `done`; None every `heartbeat_s` of silence."""
        with self._cond:
            self.listeners += 1
        try:
            pos = start
            while True:
                batch, finished = self.wait(pos, heartbeat_s)
                yield from batch
                pos += len(batch)
                if finished and pos >= self.count:
                    return
                if not batch:
                    yield None
        finally:
            with self._cond:
                self.listeners -= 1

    def status(self) -> dict[str, Any]:
        done = data_as(envelope(self._done), JobDone) if self._done is not None else None
        return {
            "id": self.id,
            "state": self.state,
            "events": self.count,
            "ok": done.ok if done is not None else None,
            "trace_id": done.trace_id if done is not None else None,
        }


Runner = Callable[[Job], None]


def supervisor_failed(job: Job) -> dict[str, Any]:
    """The error of a job whose supervisor (this server's thread, or an RQ worker's task)
    raised: the job's events end with it and `done`, whichever tier ran it."""
    return {"stage": job.last_stage or "source", "kind": "sandbox",
            "message": "the job supervisor failed; see the server log"}


class JobView(Protocol):
    """What the API needs of a job: a local `Job`, or a `RemoteJob` (server/jobs/remote.py)."""

    id: str

    @property
    def events(self) -> list[dict[str, Any]]: ...

    @property
    def finished(self) -> bool: ...

    def cancel(self) -> bool: ...

    def status(self) -> dict[str, Any]: ...

    def subscribe(self, start: int, heartbeat_s: float) -> Iterator[dict[str, Any] | None]: ...


class Jobs(Protocol):
    """Where jobs run: local supervisor threads (JobManager) or RQ (RedisJobManager)."""

    pool: WarmPool | None
    kcache: KernelCache | None

    def submit(self, request: JobRequest, client: str = "") -> JobView: ...

    def get(self, job_id: str) -> JobView | None: ...

    def cancel(self, job_id: str) -> JobView | None: ...

    def stats(self) -> dict[str, Any]: ...

    def warm(self) -> None: ...

    def shutdown(self, timeout: float = 5.0) -> None: ...

    def stop(self, reason: str, timeout: float = 8.0) -> None: ...


class JobManager:
    """A registry of jobs plus a bounded queue drained by `max_jobs` supervisor threads."""

    def __init__(
        self,
        runner: Runner,
        max_jobs: int,
        queue_size: int,
        retention_s: float = 900.0,
        pool: WarmPool | None = None,
        kcache: KernelCache | None = None,
        store: TraceReader | None = None,
        client_jobs: int = 0,
        retry_after_s: float = 30.0,
    ) -> None:
        """`store`: where finished jobs' events are read back from (None: kept in memory).
        `client_jobs`: queued or running jobs one client may hold (0: no limit)."""
        self.runner = runner
        self.pool = pool
        self.kcache = kcache
        self.store = store
        self.client_jobs = client_jobs
        self.retry_after_s = retry_after_s
        self.stopping: str | None = None
        self.max_jobs = max(1, max_jobs)
        self.queue: queue.Queue[Job | None] = queue.Queue(maxsize=max(1, queue_size))
        self.retention_s = retention_s
        self.jobs: dict[str, Job] = {}
        self.running = 0
        self.waiting: list[Job] = []  # queued jobs no slot has taken yet, in order
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._ticker: threading.Thread | None = None
        self._closed = threading.Event()

    def submit(self, request: JobRequest, client: str = "") -> Job:
        """Queue a job or raise Busy or OverQuota; supervisor threads start on the first
        submit."""
        job = Job(secrets.token_urlsafe(9), request, client=client)
        if self.stopping is not None:
            raise Busy()
        if self.pool is not None:
            self.pool.start()
        with self._lock:
            self._prune()
            held = sum(1 for j in self.jobs.values() if j.client == client and not j.finished)
            if self.client_jobs and held >= self.client_jobs:
                raise OverQuota(
                    f"this client already has {held} jobs queued or running (at most "
                    f"{self.client_jobs}); wait for one to finish", self._retry_after())
            self._start_threads()
            try:
                self.queue.put_nowait(job)
            except queue.Full:
                raise Busy() from None
            self.jobs[job.id] = job
            self.waiting.append(job)
            self._tell_waiting()
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self.jobs.get(job_id)

    def warm(self) -> None:
        """Start the warm pool now (a server does this at startup; tests let the first
        submit do it)."""
        if self.pool is not None:
            self.pool.start()

    def cancel(self, job_id: str) -> Job | None:
        job = self.get(job_id)
        if job is not None:
            job.cancel()
        return job

    def stats(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = {
                "running": self.running,
                "queued": self.queue.qsize(),
                "max_jobs": self.max_jobs,
                "queue_size": self.queue.maxsize,
                "executor": "local",
            }
        if self.pool is not None:
            out["pool"] = self.pool.stats()
        out["kernel_cache"] = self.kcache.to_json() if self.kcache is not None else None
        return out

    def _retry_after(self) -> float:
        """About when a running job will have ended: the oldest one's remaining wall clock."""
        running = [j.created for j in self.jobs.values() if j.state == "running"]
        if not running:
            return 1.0
        return max(1.0, min(self.retry_after_s, min(running) + self.retry_after_s - time.time()))

    def stop(self, reason: str, timeout: float = 8.0) -> None:
        """End every job now (a graceful shutdown): queued ones never start, running ones
        are cancelled with `reason`; each gets its `error` and `done`, and its trace is
        stored. Returns once the supervisors have cleaned up (or after `timeout`)."""
        self.stopping = reason
        with self._lock:
            jobs = [j for j in self.jobs.values() if not j.finished or j.following]
        for job in jobs:
            if job.finished:  # its follow-ups are stored as stopped
                job.stop_following(reason)
            else:
                job.cancel(reason)
        end = time.monotonic() + timeout
        while time.monotonic() < end and any(not j.finished or j.following for j in jobs):
            time.sleep(0.05)
        self.shutdown(max(0.1, end - time.monotonic()))

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the supervisor threads after the jobs in hand (tests call this)."""
        self._closed.set()
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self.queue.put(None)
        for thread in threads:
            thread.join(timeout)
        if self.pool is not None:
            self.pool.shutdown()

    def _start_threads(self) -> None:
        while len(self._threads) < self.max_jobs:
            thread = threading.Thread(
                target=self._loop, name=f"kernelscope-job-{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _tell_waiting(self) -> None:
        """Each queued job no free slot will take at once hears how it stands (called with
        the lock held, whenever the queue changes, and every WAIT_TICK_S by the ticker)."""
        free = max(0, self.max_jobs - self.running)
        now = time.time()
        for position, job in enumerate(self.waiting[free:], 1):
            try:
                job.publish("waiting", waiting_for_slot(self.running, position,
                                                        now - job.created), origin="server")
            except RuntimeError:  # cancelled and closed meanwhile
                continue
        if len(self.waiting) > free and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="kernelscope-waiting",
                                            daemon=True)
            self._ticker.start()

    def _tick(self) -> None:
        while not self._closed.wait(WAIT_TICK_S):
            with self._lock:
                if len(self.waiting) <= max(0, self.max_jobs - self.running):
                    self._ticker = None
                    return
                self._tell_waiting()

    def _loop(self) -> None:
        while True:
            job = self.queue.get()
            if job is None:
                return
            with self._lock:
                self.running += 1
                if job in self.waiting:
                    self.waiting.remove(job)
                    self._tell_waiting()
            try:
                job.set_state("running")
                self.runner(job)
            except Exception:
                log.exception("job %s: the runner failed", job.id)
            finally:
                job.following = False
                with self._lock:
                    self.running -= 1
                if not job.finished:
                    job.publish("error", supervisor_failed(job), origin="server")
                    job.publish("done", {"ok": False}, origin="server")
                if self.store is not None:
                    job.archive(self.store)

    def _prune(self) -> None:
        """Forget finished jobs past the retention time, or beyond the newest
        MAX_FINISHED_JOBS (their traces are stored; their events can be megabytes)."""
        finished = sorted(
            (j.finished_at, k) for k, j in self.jobs.items() if j.finished_at is not None
        )
        cutoff = time.time() - self.retention_s
        excess = len(finished) - MAX_FINISHED_JOBS
        for index, (finished_at, key) in enumerate(finished):
            if finished_at < cutoff or index < excess:
                del self.jobs[key]
