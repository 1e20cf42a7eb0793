"""The gunicorn worker `kernelscope serve` runs: gevent, JSON errors, a graceful stop.

In: gunicorn's worker machinery (loaded by name: `kernelscope.server.web.gworker.Worker`). Out: a
gevent
worker (one greenlet per connection, up to `worker_connections`) whose own error answers
(a request line over `limit_request_line`, a malformed header) are JSON like the app's,
and whose SIGTERM first tells every job that the server is stopping (server/web/wsgi.py).

Why gevent: an event stream holds its connection for the whole compile, and with a thread
per connection 64 held streams, or 80 sockets that never finish their headers, took every
thread. A greenlet costs a few KiB, and gunicorn's async workers bound the time to read a
request's headers by `keepalive` (a slowloris connection is dropped after it). gevent is
the async worker gunicorn itself documents for long-polling and streaming; an ASGI server
would mean rewriting a WSGI (Flask) app for no gain here.

Two bounds of its own, beside gunicorn's (1100 connections that sent their headers and then
trickled a body held every one of the 1000 connections for minutes):

- a request's body must arrive by a deadline, `BODY_TIMEOUT_S` plus one second per
  `BODY_MIN_RATE` bytes it declares (408, and the connection is closed);
- at most `per_address` connections from one peer address at a time (the next is answered
  503 and closed at once). Behind a proxy (`proxy_hops`), the cap counts requests in flight
  per forwarded client address instead, since every connection comes from the proxy.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from gunicorn import util
from gunicorn.workers.ggevent import GeventWorker
from werkzeug.exceptions import RequestTimeout

BODY_TIMEOUT_S = 10.0  # every body, however small
BODY_MIN_RATE = 256 * 1024  # bytes per second a declared body may take beyond that
UNKNOWN_LENGTH = 1 << 20  # what a chunked body is assumed to declare


class BodyTimeout(RequestTimeout):
    description = "the request body did not arrive in time"


class DeadlineReader:
    """A gunicorn body reader that raises BodyTimeout once `deadline` (monotonic) passed,
    however slowly its bytes trickle in. A body read to its end reads as empty after the
    deadline too: gunicorn reads it again before the connection's next request, and an
    event stream that outlived the deadline must not cost the connection."""

    def __init__(self, reader: Any, deadline: float) -> None:
        self.reader, self.deadline = reader, deadline

    @property
    def finished(self) -> bool:
        """Read to its end (a chunked body's end is known only to its reader: never)."""
        return getattr(self.reader, "length", None) == 0

    def read(self, size: int) -> bytes:
        import gevent

        if self.finished:  # read to its end: nothing left to wait for, however late
            return b""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BodyTimeout()
        with gevent.Timeout(left, False):
            return bytes(self.reader.read(size))
        raise BodyTimeout()


def body_deadline(declared: int | None, now: float) -> float:
    return now + BODY_TIMEOUT_S + (UNKNOWN_LENGTH if declared is None else declared) \
        / BODY_MIN_RATE


def forwarded_client(headers: list[tuple[str, str]], hops: int) -> str | None:
    """The address `hops` trusted proxies report (as werkzeug's ProxyFix takes it)."""
    values = [v for h, v in headers if h == "X-FORWARDED-FOR"]
    found = [a.strip() for a in ",".join(values).split(",") if a.strip()]
    return found[-hops] if len(found) >= hops else None


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    body = json.dumps({"error": mesg or reason, "status": status_int})
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, (head + body).encode("latin1", errors="replace"))


class Worker(GeventWorker):  # type: ignore[misc]
    on_term: list[Any] = []  # callables run (in a greenlet) when SIGTERM arrives
    per_address = 64  # set by server/web/wsgi.py from the configuration
    proxy_hops = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.open: Counter[str] = Counter()  # connections (or, behind a proxy, requests)

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        if self.proxy_hops:  # counted per request, in handle_request
            super().handle(listener, client, addr)
            return
        key = str(addr[0]) if isinstance(addr, tuple) else str(addr)
        if not self._enter(key, client):
            util.close(client)
            return
        try:
            super().handle(listener, client, addr)
        finally:
            self._leave(key)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        reader = None
        if req.body is not None:
            declared = getattr(req.body.reader, "length", None)  # Content-Length's
            reader = req.body.reader = DeadlineReader(req.body.reader,
                                                      body_deadline(declared, time.monotonic()))
        key = forwarded_client(req.headers, self.proxy_hops) or "unknown" \
            if self.proxy_hops else None
        if key is not None and not self._enter(key, sock):
            raise StopIteration()
        try:
            handled = super().handle_request(listener_name, req, sock, addr)
        finally:
            if key is not None:
                self._leave(key)
        # A body the app left unread (a 503 before a 32 MiB upload) is not drained, 1 KiB
        # at a time, to keep the connection: the connection is closed.
        if reader is not None and not reader.finished:
            raise StopIteration()
        return handled

    def _enter(self, key: str, sock: Any) -> bool:
        if self.open[key] >= self.per_address:
            write_json_error(sock, 503, "Service Unavailable",
                             f"too many connections from one address (limit {self.per_address})")
            return False
        self.open[key] += 1
        return True

    def _leave(self, key: str) -> None:
        self.open[key] -= 1
        if self.open[key] <= 0:
            del self.open[key]

    def init_process(self) -> None:
        util.write_error = write_json_error  # gunicorn's own error pages, as JSON
        super().init_process()

    def init_signals(self) -> None:
        import gevent

        super().init_signals()
        # gunicorn has just reset SIGCHLD to its default, which leaves libev's child
        # watchers (gevent's subprocess waits on them) deaf: a subprocess that exited was
        # then only noticed when another signal woke the loop (the sandbox probe hung for
        # its 30 s timeout, and the worker for its boot). Give libev its handler back.
        gevent.get_hub().loop.install_sigchld()

    def handle_exit(self, sig: int, frame: Any) -> None:
        import gevent

        for hook in self.on_term:
            gevent.spawn(hook)
        super().handle_exit(sig, frame)
