"""Highlighting out of the web tier: a few persistent child processes, each answer on a deadline.

In: source text and a language (the `/api/highlight` route). Out: Pygments' HTML, from a
child process (server/web/highlight_child.py), or `HighlightRefused` saying why not.

Pygments is pure Python, and its LLVM lexer is super-linear on crafted input (16 KiB of
`a.a.a` took 4 s, 90 KiB past a minute): run in the web tier, one request stalled every
stream beside it. A thread cannot be stopped and holds the interpreter lock inside the
lexer's regular expressions; a child process can be killed. So each request is handed to
an idle child (started on first use, `size` at most; it says when it is ready), waits for
its answer with the child's pipes polled (cooperative under gevent), and past `deadline_s`
the child is killed and a fresh one takes its place on the next request. One request per
client address at a time, so one client cannot hold every child.
"""

from __future__ import annotations

import json
import os
import queue
import resource
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kernelscope.server.web.highlight_child import HEADER

CHILD = [sys.executable, "-m", "kernelscope.server.web.highlight_child"]
START_S = 60.0  # a child's start (its imports), not counted in a request's deadline


class HighlightRefused(Exception):
    """Not highlighted: `status` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _limits(memory_mb: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        os.nice(5)

    return apply


@dataclass
class _Child:
    proc: subprocess.Popen[bytes]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except ProcessLookupError:
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.proc.wait()


@dataclass
class HighlightPool:
    """Up to `size` highlighting children; a request waits `wait_s` for an idle one."""

    size: int
    deadline_s: float
    memory_mb: int
    repo_dir: str
    wait_s: float = 5.0
    _idle: queue.LifoQueue[_Child | None] = field(default_factory=queue.LifoQueue)
    _clients: dict[str, int] = field(default_factory=dict)
    # Made when the pool is (after gevent patched threading, in a gunicorn worker).
    _lock: threading.Lock = field(default_factory=lambda: threading.Lock())

    def __post_init__(self) -> None:
        for _ in range(max(1, self.size)):
            self._idle.put(None)  # a slot; its child starts when first used

    def highlight(self, code: str, language: str, client: str) -> str:
        with self._lock:
            if self._clients.get(client):
                raise HighlightRefused("one highlight at a time per client", 429)
            self._clients[client] = 1
        try:
            return self._in_child(json.dumps({"code": code, "language": language}).encode())
        finally:
            with self._lock:
                self._clients.pop(client, None)

    def close(self) -> None:
        while True:
            try:
                child = self._idle.get_nowait()
            except queue.Empty:
                return
            if child is not None:
                child.kill()

    def _in_child(self, ask: bytes) -> str:
        try:
            child = self._idle.get(timeout=self.wait_s)
        except queue.Empty:
            raise HighlightRefused("busy highlighting, try again", 503) from None
        try:
            if child is None or not child.alive():
                child = self._start()
                _exchange(child.proc, b"", time.monotonic() + START_S, send=False)  # ready
            raw = _exchange(child.proc, ask, time.monotonic() + self.deadline_s)
        except BaseException:
            if child is not None:
                child.kill()
            self._idle.put(None)
            raise
        self._idle.put(child)
        answer = json.loads(raw)
        if "html" not in answer:
            raise HighlightRefused(f"cannot highlight this: {answer.get('error')}", 400)
        return str(answer["html"])

    def _start(self) -> _Child:
        proc = subprocess.Popen(CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=self.repo_dir,
                                preexec_fn=_limits(self.memory_mb))
        return _Child(proc)


def _exchange(proc: subprocess.Popen[bytes], ask: bytes, deadline: float, send: bool = True
              ) -> bytes:
    """Send one framed request (unless not `send`) and read one framed answer, by
    `deadline` (monotonic)."""
    assert proc.stdin is not None and proc.stdout is not None
    out, inp = proc.stdin.fileno(), proc.stdout.fileno()
    os.set_blocking(out, False)
    os.set_blocking(inp, False)
    pending = memoryview(len(ask).to_bytes(HEADER, "big") + ask if send else b"")
    got = bytearray()
    need = HEADER
    while len(got) < need:
        left = deadline - time.monotonic()
        if left <= 0:
            raise HighlightRefused("highlighting took too long; shown without colours", 422)
        readable, writable, _ = select.select([inp], [out] if pending else [], [], left)
        if writable:
            pending = pending[os.write(out, pending[:1 << 16]):]
        if readable:
            chunk = os.read(inp, 1 << 20)
            if not chunk:
                raise HighlightRefused("the highlighter stopped", 500)
            got += chunk
            if need == HEADER and len(got) >= HEADER:
                need = HEADER + int.from_bytes(got[:HEADER], "big")
    return bytes(got[HEADER:need])
