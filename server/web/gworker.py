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
"""

from __future__ import annotations

import json
from typing import Any

from gunicorn import util
from gunicorn.workers.ggevent import GeventWorker


def write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    body = json.dumps({"error": mesg or reason, "status": status_int})
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, (head + body).encode("latin1", errors="replace"))


class Worker(GeventWorker):  # type: ignore[misc]
    on_term: list[Any] = []  # callables run (in a greenlet) when SIGTERM arrives

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
