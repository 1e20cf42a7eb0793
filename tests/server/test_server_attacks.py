"""Issue 30's attacks on a real `kernelscope serve` (gunicorn, gevent) on loopback.

Each test runs one attack while `HealthWatch` asks /api/health every 0.1 s from another
loopback address, and checks every answer came within 0.5 s. Every loop is bounded.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from attack_support import HealthWatch
from test_server_fairness import LiveServer, live  # noqa: F401  (the fixture)

TRICKLERS = 1100


def test_a_crafted_llvm_highlight_never_stalls_health(live: LiveServer) -> None:  # noqa: F811
    """Attack 1: 48 KiB of `a.a.a` as LLVM took the web tier 33 s."""
    answer: dict[str, Any] = {}

    def attack() -> None:
        start = time.monotonic()
        status, _, body = live.request("POST", "/api/highlight",
                                       {"language": "llvm", "code": "a." * 24000}, timeout=90)
        answer.update(status=status, body=json.loads(body), took=time.monotonic() - start)

    with HealthWatch(live.port) as watch:
        time.sleep(0.5)
        thread = threading.Thread(target=attack)
        thread.start()
        thread.join(100)
        time.sleep(0.5)
    assert watch.held(), watch.summary()
    assert answer["status"] == 422 and "too long" in answer["body"]["error"], answer
    assert answer["took"] < 20, answer
    status, _, body = live.request("POST", "/api/highlight",
                                   {"language": "llvm", "code": "%x = add i32 1, 2\n"})
    assert status == 200 and 'id="L-1"' in json.loads(body)["html"]


def _trickler(port: int) -> socket.socket | None:
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2,
                                     source_address=("127.0.0.1", 0))
        s.sendall(b"POST /api/compile HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
        return s
    except OSError:
        return None


def _closed_after_a_byte(s: socket.socket) -> bool:
    """Send one more byte; has the server closed the connection (after any answer)?"""
    try:
        s.sendall(b" ")
        s.setblocking(False)
        while chunk := s.recv(4096):  # an answer (408, 503) before the close
            del chunk
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_trickling_bodies_never_stall_health_and_are_dropped(live: LiveServer) -> None:  # noqa: F811
    """Attack 5: 1100 connections that sent headers and then a byte now and then held all
    1000 of gunicorn's connections: health timed out for 40 s, and one stayed over 120 s."""
    held: list[socket.socket] = []
    with HealthWatch(live.port) as watch:
        try:
            for _ in range(TRICKLERS):
                s = _trickler(live.port)
                if s is not None:
                    held.append(s)
            open_at: list[int] = []
            closed: set[int] = set()
            for _ in range(25):  # a byte a second on each still open, for 25 s
                for i, s in enumerate(held):
                    if i not in closed and _closed_after_a_byte(s):
                        closed.add(i)
                open_at.append(len(held) - len(closed))
                time.sleep(1)
        finally:
            for s in held:
                s.close()
    assert watch.held(), watch.summary()
    assert open_at[-1] == 0, f"still open after 25 s: {open_at}"
