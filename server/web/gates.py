"""Fair shares: how many event streams one job and one client may hold open at once.

In: a job id and a client key (its address, server/web/api.py says which) for each stream
that opens. Out: a slot, or `Refused` saying which cap was hit (the API answers 429 with
`Retry-After`). Per process: each web process counts its own streams, which is what
bounds its own connections and memory.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator


class Refused(Exception):
    """A cap was reached; `args[0]` says which."""


class StreamGate:
    """Counts open streams per job and per client."""

    def __init__(self, per_job: int, per_client: int) -> None:
        self.per_job, self.per_client = per_job, per_client
        self._jobs: Counter[str] = Counter()
        self._clients: Counter[str] = Counter()
        self._lock = threading.Lock()

    def acquire(self, job_id: str, client: str) -> None:
        with self._lock:
            if self._clients[client] >= self.per_client:
                raise Refused(f"too many open event streams from this client "
                              f"(at most {self.per_client})")
            if self._jobs[job_id] >= self.per_job:
                raise Refused(f"too many open event streams on this job (at most {self.per_job})")
            self._jobs[job_id] += 1
            self._clients[client] += 1

    def release(self, job_id: str, client: str) -> None:
        with self._lock:
            for counter, key in ((self._jobs, job_id), (self._clients, client)):
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]

    def held(self, job_id: str, client: str, chunks: Iterator[str]) -> Held:
        """`chunks`, releasing the slot when the stream ends or the client goes away."""
        return Held(chunks, lambda: self.release(job_id, client))

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"open": sum(self._jobs.values()), "per_job": self.per_job,
                    "per_client": self.per_client}


class Held:
    """A response body that gives its slot back once, when the server closes it (WSGI
    calls `close()` whether or not the body was ever read) or when it runs out."""

    def __init__(self, chunks: Iterator[str], release: Callable[[], None]) -> None:
        self.chunks, self._release = chunks, release
        self._released = False

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self.chunks
        finally:
            self.close()

    def close(self) -> None:
        if not self._released:
            self._released = True
            close = getattr(self.chunks, "close", None)
            if close is not None:
                close()
            self._release()
