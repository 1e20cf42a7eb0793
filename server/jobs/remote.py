"""Jobs on Redis through RQ: the web tier enqueues, `kernelscope worker` processes run them.

In: `QUEUE_URL` (`redis://host:port/db`) in the app's and the workers' configuration.
Out: `RedisJobManager`, the same interface as the local JobManager (server/jobs/manager.py),
whose jobs (`RemoteJob`) read their events from Redis, and the keys and the append script
that the worker side (server/jobs/rqworker.py, `kernelscope worker`) shares with it. Jobs are
enqueued as JSON (never pickle) for the one task `kernelscope.server.jobs.rqworker.execute`.

Keys, per job (`<ns>` is `QUEUE_NAME`):

- `ks:<ns>:job:<id>` a hash: the request, `created`, `state`, `finished`;
- `ks:<ns>:job:<id>:events` a Redis stream, entry id `0-<seq+1>`, one event per entry.
  Appends go through one Lua script that numbers the event, refuses anything after `done`
  and marks the job finished, so a worker and a web tier that both try to end a job end it
  once. A subscriber reads the stream from any seq (replay and `Last-Event-ID` for free);
- `ks:<ns>:job:<id>:alive` set by the worker every second with a 6 s expiry while it runs;
- `ks:<ns>:job:<id>:cancel` set by `POST /api/jobs/<id>/cancel`;
- `ks:<ns>:client:<client>` a set of the job ids a client has queued or running (the
  per-client quota; finished ones are dropped from it at the next submit).

A stream outlives a Redis outage: it sends heartbeats while it reconnects, resumes from
the last seq it sent, and after `OUTAGE_S` without Redis (or without the job, once Redis
is back) ends with an `error` and `done` of its own (the worker keeps the job's events and
writes them back when Redis returns, so a later stream finds the whole job).

Why RQ's `SimpleWorker`: the task body never runs the compiler or imports torch; it starts
a sandboxed process per job (warm from the pool, or cold) and supervises it, so "one
process per job", which CUDA's fork rules need, is the sandbox's process, and it is a fresh
exec, never a fork of a process that touched CUDA. A forking RQ worker would fork a work
horse per job as well, and that horse could not take over warm workers the parent started
(their pipes belong to the parent). A worker killed with kill -9 takes its sandbox with it
(bubblewrap's --die-with-parent); its job's `alive` key expires and the web tier, which
watches it while anyone streams the job, fails the job with an `error` (kind `killed`) and
stores the trace. Every job gets an RQ timeout of the job's wall clock plus a margin.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Iterator
from typing import Any

from kernelscope.compiler.events.read import data_as, envelope
from kernelscope.compiler.events.stage import TERMINAL
from kernelscope.compiler.events.types import JobDone
from kernelscope.server.jobs.kcache import KernelCache
from kernelscope.server.jobs.manager import (
    SCHEMA_VERSION,
    Busy,
    JobRequest,
    OverQuota,
    QueueUnavailable,
)
from kernelscope.server.jobs.pool import WarmPool

log = logging.getLogger(__name__)
ALIVE_TTL_MS = 6000
ALIVE_EVERY_S = 1.0
CANCEL_POLL_S = 0.2
LOST_AFTER_S = 2.0  # `alive` missing this long (after the job started): the worker is gone
OUTAGE_S = 30.0  # a stream waits this long for Redis (or for the job to reappear in it)
# The one function a worker runs (server/jobs/rqworker.py).
TASK = "kernelscope.server.jobs.rqworker.execute"

APPEND = """
if redis.call('HGET', KEYS[1], 'finished') == '1' then return -1 end
local n = redis.call('XLEN', KEYS[2])
redis.call('XADD', KEYS[2], '0-' .. (n + 1), 'stage', ARGV[1], 'ms', ARGV[2], 'data', ARGV[3],
           'origin', ARGV[5])
if ARGV[1] == 'done' then
  redis.call('HSET', KEYS[1], 'finished', '1', 'state', 'finished')
  redis.call('EXPIRE', KEYS[1], ARGV[4])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
return n
"""


PROBE_TIMEOUT_S = 0.3  # how long /api/health waits for Redis


def _redis(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=30, health_check_interval=30)


def waiting_key(ns: str) -> str:
    return f"ks:{ns}:waiting"


def client_key(ns: str, client: str) -> str:
    return f"ks:{ns}:client:{client}"


class Keys:
    def __init__(self, ns: str, job_id: str) -> None:
        base = f"ks:{ns}:job:{job_id}"
        self.meta, self.events = base, f"{base}:events"
        self.alive, self.cancel = f"{base}:alive", f"{base}:cancel"


def _decode(entry_id: bytes | str, fields: dict[bytes, bytes]) -> dict[str, Any]:
    ident = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    event = {
        "schema": SCHEMA_VERSION,
        "seq": int(ident.split("-")[1]) - 1,
        "stage": fields[b"stage"].decode(),
        "ms": float(fields[b"ms"]),
        "data": json.loads(fields[b"data"]),
    }
    if fields.get(b"origin"):
        event["origin"] = fields[b"origin"].decode()
    return event


def append(
    conn: Any,
    keys: Keys,
    stage: str,
    data: dict[str, Any],
    ms: float,
    retention_s: float,
    origin: str | None = None,
) -> int:
    """Append one event; its seq, or -1 when the job had already finished."""
    script = conn.register_script(APPEND)
    n = script(
        keys=[keys.meta, keys.events],
        args=[stage, repr(float(ms)), json.dumps(data), int(retention_s), origin or ""],
    )
    return int(n)


# -- the web tier -------------------------------------------------------------------------
class _Quiet:
    """Seconds of silence since the last event or heartbeat."""

    def __init__(self, heartbeat_s: float) -> None:
        self.heartbeat_s = heartbeat_s
        self.seconds = 0.0

    def add(self, seconds: float) -> bool:
        """Count `seconds` more of silence: True when a heartbeat is due (the count
        starts again)."""
        self.seconds += seconds
        if self.seconds < self.heartbeat_s:
            return False
        self.seconds = 0.0
        return True


class RemoteJob:
    """A job whose events live in Redis (any web process can serve any job)."""

    def __init__(self, manager: RedisJobManager, job_id: str, meta: dict[bytes, bytes]) -> None:
        self.manager, self.id = manager, job_id
        self.keys = Keys(manager.ns, job_id)
        body = json.loads(meta[b"request"])
        self.request = JobRequest(body["code"], body["options"], body.get("entry"))
        self.created = float(meta[b"created"])
        self._seen_alive = False
        self._missing_since: float | None = None

    @property
    def conn(self) -> Any:
        return self.manager.conn

    @property
    def events(self) -> list[dict[str, Any]]:
        return [_decode(i, f) for i, f in self.conn.xrange(self.keys.events)]

    @property
    def finished(self) -> bool:
        return self.conn.hget(self.keys.meta, "finished") == b"1"

    @property
    def state(self) -> str:
        value = self.conn.hget(self.keys.meta, "state")
        return value.decode() if value else "queued"

    def cancel(self) -> bool:
        if self.finished:
            return False
        self.conn.set(self.keys.cancel, b"1", ex=int(self.manager.retention_s))
        if self.state == "queued":
            # No worker has it yet: end it here (a worker that takes it later sees it ended).
            self.manager.fail(self, "cancelled", "Cancelled")
        return True

    def status(self) -> dict[str, Any]:
        self.watch()  # a client that polls instead of streaming also learns of a lost worker
        events = self.events
        done = data_as(envelope(events[-1]), JobDone) if events else None
        return {
            "id": self.id,
            "state": self.state,
            "events": len(events),
            "ok": done.ok if done is not None else None,
            "trace_id": done.trace_id if done is not None else None,
        }

    def subscribe(self, start: int, heartbeat_s: float) -> Iterator[dict[str, Any] | None]:
        """Events from seq `start` until `done`; None for each `heartbeat_s` of silence.
        While it waits it also watches the worker: a job whose worker died is failed. A
        Redis outage is waited out for OUTAGE_S (see the module docstring)."""
        import redis

        last = f"0-{start}"
        block_ms = max(1, int(min(heartbeat_s, 1.0) * 1000))
        quiet = _Quiet(heartbeat_s)
        sent: list[dict[str, Any]] = []
        away_since: float | None = None
        while True:
            try:
                reply = self._read(last, block_ms)
                away_since = None
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                now = time.monotonic()
                away_since = away_since or now
                if now - away_since >= OUTAGE_S:
                    yield from self.manager.lost(self, sent, str(exc))
                    return
                time.sleep(min(1.0, block_ms / 1000))
                if quiet.add(1.0):
                    yield None
                continue
            batch = [_decode(i, f) for _key, entries in reply or [] for i, f in entries]
            for event in batch:
                sent.append(event)
                yield event
                if envelope(event).stage == "done":
                    return
            if batch:
                last = f"0-{envelope(batch[-1]).seq + 1}"
                quiet.seconds = 0.0
                continue
            if quiet.add(block_ms / 1000):
                yield None
            self.watch()

    def _read(self, last: str, block_ms: int) -> Any:
        """The job's events after `last`, waiting up to `block_ms`; a job gone from Redis
        is an outage."""
        import redis

        reply = self.conn.xread({self.keys.events: last}, block=block_ms, count=100)
        if not reply and not self.conn.exists(self.keys.meta):
            raise redis.ConnectionError("the job is not in Redis (it restarted?)")
        return reply

    def watch(self) -> None:
        """Fail the job if its worker stopped beating (kill -9, a host gone)."""
        if self.state != "running" or self.finished:
            return
        if self.conn.exists(self.keys.alive):
            self._seen_alive, self._missing_since = True, None
            return
        now = time.monotonic()
        if self._missing_since is None:
            self._missing_since = now
        elif now - self._missing_since >= LOST_AFTER_S:
            self.manager.fail(
                self,
                "killed",
                "The worker running this job stopped (its process or host died) "
                f"during the {self._last_stage()} stage",
            )

    def _last_stage(self) -> str:
        stages = [s for s in (envelope(e).stage for e in self.events) if s not in TERMINAL]
        return stages[-1] if stages else "source"


class RedisJobManager:
    """The JobManager interface on RQ: submit enqueues, get finds any job in Redis."""

    pool: WarmPool | None = None  # warm workers live on the worker hosts
    kcache: KernelCache | None = None

    def __init__(self, cfg: dict[str, Any], store: Any) -> None:
        from rq import Queue
        from rq.serializers import JSONSerializer

        self.url = str(cfg["QUEUE_URL"])
        self.ns = str(cfg.get("QUEUE_NAME") or "kernelscope")
        self.store = store
        self.queue_size = int(cfg["QUEUE_SIZE"])
        self.retention_s = float(cfg["JOB_RETENTION_S"])
        self.job_timeout = int(float(cfg["JOB_TIMEOUT_S"]) + 120)
        self.conn = _redis(self.url)
        self._probe: Any = None  # stats' own connection (see stats)
        self.client_jobs = int(cfg.get("CLIENT_JOBS") or 0)
        self.retry_after_s = float(cfg["JOB_TIMEOUT_S"])
        self.conn.ping()
        self.queue = Queue(self.ns, connection=self.conn, serializer=JSONSerializer)

    def submit(self, request: JobRequest, client: str = "") -> RemoteJob:
        # Admission is one atomic counter of jobs no worker has taken yet (a worker
        # decrements it when it takes one): checking the queue's length and then enqueueing
        # would let a burst of requests all see room.
        self._check_quota(client)
        waiting = waiting_key(self.ns)
        if int(self.conn.incr(waiting)) > self.queue_size:
            self.conn.decr(waiting)
            raise Busy()
        job_id = secrets.token_urlsafe(9)
        keys = Keys(self.ns, job_id)
        body = {"code": request.code, "options": request.options, "entry": request.entry}
        meta = {"request": json.dumps(body), "created": repr(time.time()), "state": "queued",
                "client": client}
        self.conn.hset(keys.meta, mapping=meta)
        self.conn.expire(keys.meta, int(self.retention_s + self.job_timeout * 4))
        mine = client_key(self.ns, client)
        self.conn.sadd(mine, job_id)
        self.conn.expire(mine, int(self.job_timeout * 4))
        self.queue.enqueue_call(
            TASK,
            args=(self.ns, job_id),
            job_id=f"{self.ns}-{job_id}",
            timeout=self.job_timeout,
            result_ttl=int(self.retention_s),
            failure_ttl=int(self.retention_s),
        )
        found = self.get(job_id)
        assert found is not None
        return found

    def _check_quota(self, client: str) -> None:
        if not self.client_jobs:
            return
        mine = client_key(self.ns, client)
        held = 0
        for member in self.conn.smembers(mine):
            job_id = member.decode()
            state = self.conn.hget(Keys(self.ns, job_id).meta, "finished")
            if state == b"1" or not self.conn.exists(Keys(self.ns, job_id).meta):
                self.conn.srem(mine, member)
            else:
                held += 1
        if held >= self.client_jobs:
            raise OverQuota(f"this client already has {held} jobs queued or running (at most "
                            f"{self.client_jobs}); wait for one to finish", self.retry_after_s)

    def lost(self, job: RemoteJob, sent: list[dict[str, Any]], why: str
             ) -> Iterator[dict[str, Any]]:
        """End a stream whose job Redis cannot give us: an `error`, the trace of what was
        seen stored, and `done` (sent to this client; Redis cannot take them now)."""
        error = {"stage": next((s for s in (envelope(e).stage for e in reversed(sent))
                                if s not in TERMINAL), "source"),
                 "kind": "killed", "line": None, "traceback": None,
                 "message": f"The job queue (Redis) could not be reached for {OUTAGE_S:g} s "
                            f"({why[:200]}); the job may still finish: reload its permalink "
                            "later"}  # fmt: skip
        events = [*sent, {"schema": SCHEMA_VERSION, "seq": len(sent), "stage": "error",
                          "ms": 0.0, "data": error, "origin": "server"}]
        wall_ms = round((time.time() - job.created) * 1000, 1)
        data: dict[str, Any] = {"ok": False, "wall_ms": wall_ms}
        closing = {"schema": SCHEMA_VERSION, "seq": len(events), "stage": "done", "ms": 0.0,
                   "data": data, "origin": "server"}
        try:
            data["trace_id"] = self.store.put(job.request.code, job.request.trace_options(),
                                              [*events, closing], False)
        except Exception:  # noqa: BLE001 - the stream still ends cleanly
            data["store_error"] = "the trace could not be stored"
        yield events[-1]
        yield closing

    def stop(self, reason: str, timeout: float = 8.0) -> None:
        """The web tier holds no job: the workers finish them; open streams just end."""
        return None

    def get(self, job_id: str) -> RemoteJob | None:
        if not job_id.replace("-", "").replace("_", "").isalnum() or len(job_id) > 40:
            return None
        meta = self.conn.hgetall(Keys(self.ns, job_id).meta)
        return RemoteJob(self, job_id, meta) if meta else None

    def cancel(self, job_id: str) -> RemoteJob | None:
        job = self.get(job_id)
        if job is not None:
            job.cancel()
        return job

    def fail(self, job: RemoteJob, kind: str, message: str) -> None:
        """End a job from the web tier: `error` + the stored trace + `done`, once."""
        keys = job.keys
        stage = job._last_stage() if job.events else "source"
        error = {"stage": stage, "kind": kind, "message": message, "line": None,
                 "traceback": None}  # fmt: skip
        if append(self.conn, keys, "error", error, 0.0, self.retention_s) < 0:
            return
        events = job.events
        data: dict[str, Any] = {"ok": False}
        stages = sum(envelope(e).ms for e in events)
        data |= {"wall_ms": round((time.time() - job.created) * 1000, 1), "stages_ms": stages}
        closing = {"schema": SCHEMA_VERSION, "seq": len(events), "stage": "done", "ms": 0.0,
                   "data": data}
        try:
            opts = job.request.trace_options()
            data["trace_id"] = self.store.put(job.request.code, opts, [*events, closing], False)
        except Exception:
            log.exception("job %s: could not store the trace", job.id)
            data["store_error"] = "the trace could not be stored"
        append(self.conn, keys, "done", data, 0.0, self.retention_s)

    def stats(self) -> dict[str, Any]:
        """The queue's counts, through a connection of its own with a short timeout (health
        answers at once while Redis is down); QueueUnavailable says why not."""
        import redis
        from rq import Queue, Worker
        from rq.registry import StartedJobRegistry

        if self._probe is None:
            self._probe = redis.Redis.from_url(self.url, socket_timeout=PROBE_TIMEOUT_S,
                                               socket_connect_timeout=PROBE_TIMEOUT_S)
        try:
            queue = Queue(self.ns, connection=self._probe)
            return {
                "executor": "rq",
                "running": StartedJobRegistry(self.ns, connection=self._probe).count,
                "queued": queue.count,
                "queue_size": self.queue_size,
                "workers": Worker.count(queue=queue),
            }
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise QueueUnavailable(f"the job queue (Redis) cannot be reached: "
                                   f"{type(e).__name__}") from None

    def warm(self) -> None:
        return None

    def shutdown(self, timeout: float = 5.0) -> None:
        self.conn.close()
