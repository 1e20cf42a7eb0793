"""`kernelscope worker`: an RQ worker that runs our one job function, and nothing else.

In: the worker's configuration (the same keys as the app's, server/config.py) and jobs
from Redis. Out: each job run exactly as a local supervisor thread runs it (server/jobs/worker.py
with the runtime of server/runtime.py: warm pool, sandbox, limits, kernel cache), its
events appended to Redis (server/jobs/remote.py keys) and its trace stored.

Redis is not trusted to say what runs. Anyone who can write to it could enqueue any
function (`shutil.copy`, `os.system`) or a pickle that runs code when loaded; so:

- job data is JSON (RQ's JSONSerializer), never pickle, on both sides;
- the job class resolves one function only, `execute` below, with no instance and no
  callbacks; anything else fails the job without importing or calling anything;
- `execute` validates what it reads (ids, the request: code size, options, entry) as the
  API does, and the sandbox comes from the worker's own configuration, whatever the job
  says.

Redis may also go away (a restart without persistence loses every key). A job's events
are kept in the worker's memory as well, and `sync` writes whatever Redis lacks once it
answers again (the job's hash included), so a job outlives a Redis restart; the worker
itself reconnects, as RQ's own loop does, and a stale registration of its own name (a
worker killed with -9 on this host) is cleared instead of refusing to start.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
from typing import Any

from rq.job import Job as RqJob

from kernelscope.compiler.events.read import envelope
from kernelscope.server.jobs.inputs import entry_name_ok
from kernelscope.server.jobs.manager import Job, JobRequest, supervisor_failed
from kernelscope.server.jobs.remote import (
    ALIVE_EVERY_S,
    ALIVE_TTL_MS,
    CANCEL_POLL_S,
    TASK,
    Keys,
    _redis,
    append,
    waiting_key,
)
from kernelscope.server.runtime import Runtime, build_runtime
from kernelscope.server.web.options import parse_options

log = logging.getLogger(__name__)
JOB_ID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
SYNC_RETRY_S = 60.0  # how long a finished job waits for Redis to come back


class OurTaskOnly(RqJob):
    """An RQ job that can only ever be `execute(ns, job_id)`."""

    @property
    def func(self) -> Any:
        if self.func_name != TASK or self.instance is not None:
            raise PermissionError(f"refused: this worker runs {TASK} only, not {self.func_name!r}")
        return execute

    @property
    def success_callback(self) -> None:
        return None

    @property
    def failure_callback(self) -> None:
        return None

    @property
    def stopped_callback(self) -> None:
        return None


class RedisJob(Job):
    """The worker's side of a job: a local Job whose events also go to Redis."""

    def __init__(self, conn: Any, ns: str, job_id: str, request: JobRequest, created: float,
                 retention_s: float, meta: dict[bytes, bytes]) -> None:  # fmt: skip
        super().__init__(job_id, request, created=created)
        self.conn, self.keys, self.retention_s = conn, Keys(ns, job_id), retention_s
        self.meta = meta
        self._cancel_checked = 0.0
        self.ended_elsewhere = False
        self._synced = 0  # events Redis is known to hold

    def publish(
        self, stage: str, data: dict[str, Any], ms: float = 0.0, origin: str | None = None
    ) -> dict[str, Any]:
        event = super().publish(stage, data, ms, origin)
        self.sync()
        return event

    def sync(self) -> bool:
        """Write the events Redis lacks; False while Redis cannot be reached."""
        import redis

        try:
            if self._synced == 0 or not self.conn.exists(self.keys.meta):
                # A Redis that restarted lost the job: put its hash back.
                self.conn.hset(self.keys.meta, mapping={
                    k.decode(): v for k, v in self.meta.items() if k != b"finished"})
                self.conn.hset(self.keys.meta, "state", "running")
                self._synced = int(self.conn.xlen(self.keys.events))
            for event in map(envelope, self._events[self._synced:]):
                n = append(self.conn, self.keys, event.stage, dict(event.data), event.ms,
                           self.retention_s, event.origin)
                if n < 0:
                    self.ended_elsewhere = True  # cancelled or failed by the web tier
                    break
                self._synced += 1
            return True
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("job %s: Redis unreachable (%s); events kept here", self.id, exc)
            return False

    def cancel_requested(self) -> bool:
        if self.ended_elsewhere or super().cancel_requested():
            return True
        now = time.monotonic()
        if now - self._cancel_checked >= CANCEL_POLL_S:
            self._cancel_checked = now
            try:
                if self.conn.exists(self.keys.cancel):
                    self.cancel()
            except Exception:  # noqa: BLE001 - Redis away: the job goes on
                pass
        return super().cancel_requested()


# The worker process's runtime and connection, set once by run_worker before RQ starts
# taking jobs: RQ calls `execute` by its import path, so this is how the task reaches them.
_RUNTIME: Runtime | None = None
_CONN: Any = None


def _request(meta: dict[bytes, bytes], max_code: int) -> JobRequest:
    """The request as the API would have accepted it, or ValueError."""
    body = json.loads(meta[b"request"])
    code, entry = body.get("code"), body.get("entry")
    if not isinstance(code, str) or len(code.encode("utf-8")) > max_code:
        raise ValueError("the job's code is missing or too large")
    if entry is not None and (not isinstance(entry, str) or not entry_name_ok(entry)):
        raise ValueError("the job's entry is not a Python name")
    return JobRequest(code, parse_options(body.get("options")), entry)


def execute(ns: str, job_id: str) -> dict[str, Any]:
    """The RQ task: run one job with the worker's runtime."""
    from kernelscope.server.jobs.finish import finish
    from kernelscope.server.jobs.worker import cancelled, run_job

    rt, conn = _RUNTIME, _CONN
    if rt is None:
        raise RuntimeError(
            "kernelscope.server.jobs.rqworker.execute runs only inside `kernelscope worker`")
    job = _claim(rt, conn, ns, job_id)
    if job is None:
        return {"skipped": True}  # expired, or cancelled while it was queued
    keys = Keys(ns, job_id)
    stop = threading.Event()
    beat = threading.Thread(target=_beat, args=(conn, keys, stop), daemon=True)
    conn.set(keys.alive, b"1", px=ALIVE_TTL_MS)
    beat.start()
    try:
        job.state = "running"
        run_job(job, rt.settings, rt.store, rt.pool, rt.kcache)
    except Exception:
        log.exception("job %s failed in the worker", job_id)
        if not job.finished:
            failed = cancelled(job) if job.cancel_requested() else supervisor_failed(job)
            job.publish("error", failed, origin="server")
            finish(job, rt.store, {"ok": False})
    finally:
        stop.set()
        beat.join(5)
        _settle(conn, job, keys)
    return {"ok": bool(job.finished and job.status()["ok"])}


def _claim(rt: Runtime, conn: Any, ns: str, job_id: str) -> RedisJob | None:
    """The queued job `job_id` of queue `ns`, marked running; None when it expired or was
    cancelled while queued. A job of another queue or a malformed id is refused."""
    own = str(rt.config.get("QUEUE_NAME") or "kernelscope")
    if ns != own or not isinstance(job_id, str) or not JOB_ID.match(job_id):
        raise PermissionError("refused: a job for another queue, or a malformed id")
    keys = Keys(ns, job_id)
    conn.decr(waiting_key(ns))  # taken off the queue: room for one more
    meta = conn.hgetall(keys.meta)
    if not meta or meta.get(b"finished") == b"1":
        return None
    request = _request(meta, int(rt.config["MAX_CODE_BYTES"]))
    job = RedisJob(conn, ns, job_id, request, float(meta[b"created"]),
                   float(rt.config["JOB_RETENTION_S"]), meta)
    conn.hset(keys.meta, "state", "running")
    return job


def _settle(conn: Any, job: RedisJob, keys: Keys) -> None:
    """After the job: its events written back to Redis (retried for SYNC_RETRY_S through an
    outage), its `alive` key gone."""
    end = time.monotonic() + SYNC_RETRY_S
    while not job.sync() and time.monotonic() < end:
        time.sleep(1.0)
    try:
        conn.delete(keys.alive)
    except Exception:  # noqa: BLE001 - the key expires by itself
        pass


def _beat(conn: Any, keys: Keys, stop: threading.Event) -> None:
    while not stop.wait(ALIVE_EVERY_S):
        try:
            conn.set(keys.alive, b"1", px=ALIVE_TTL_MS)
        except Exception:  # noqa: BLE001 - a Redis hiccup must not kill the job
            log.warning("could not refresh %s", keys.alive)


def clear_stale_name(conn: Any, name: str) -> bool:
    """A registration of `name` left by a dead worker on this host: remove it (RQ would
    refuse the name until it expires, minutes later). True if one was removed."""
    from rq.worker_registration import REDIS_WORKER_KEYS

    key = f"rq:worker:{name}"
    info = conn.hgetall(key)
    if not info or b"death" in info:
        return False
    host, pid = info.get(b"hostname", b"").decode(), info.get(b"pid", b"0").decode()
    if host != socket.gethostname() or not pid.isdigit() or _alive(int(pid)):
        return False
    conn.delete(key)
    conn.srem(REDIS_WORKER_KEYS, key)
    for queue in (info.get(b"queues") or b"").decode().split(","):
        if queue:
            conn.srem(f"rq:workers:{queue}", key)
    log.warning("removed the registration of worker %s (pid %s, no longer running)", name, pid)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_worker(cfg: dict[str, Any], name: str | None = None, burst: bool = False) -> int:
    """`kernelscope worker`: take jobs from the queue until stopped (or empty, `burst`)."""
    global _RUNTIME, _CONN
    import redis
    from rq import Queue, SimpleWorker
    from rq.serializers import JSONSerializer

    local = {**cfg, "QUEUE_URL": None}  # jobs run here
    if local.get("WARM_POOL") is None:
        local["WARM_POOL"] = 1  # a worker runs one job at a time: one warm process
    _RUNTIME = runtime = build_runtime(local)
    _CONN = conn = _redis(str(cfg["QUEUE_URL"]))
    if runtime.pool is not None:
        runtime.pool.start()
    ns = str(cfg.get("QUEUE_NAME") or "kernelscope")
    worker_name = name or f"{socket.gethostname()}-{os.getpid()}"
    mode = runtime.settings.isolation.mode
    print(f"kernelscope worker {worker_name}: queue {ns!r}, sandbox {mode}", flush=True)
    try:
        while True:
            try:
                clear_stale_name(conn, worker_name)
                queue = Queue(ns, connection=conn, serializer=JSONSerializer)
                worker = SimpleWorker([queue], connection=conn, name=worker_name,
                                      serializer=JSONSerializer, job_class=OurTaskOnly)
                worker.work(burst=burst, logging_level="WARNING")
                return 0
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                log.warning("Redis unreachable (%s); reconnecting in 2 s", exc)
                time.sleep(2.0)
    finally:
        if runtime.pool is not None:
            runtime.pool.shutdown()
