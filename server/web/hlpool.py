"""Highlighting out of the web tier: a few persistent child processes, each answer on a deadline.

In: source text and a language (the `/api/highlight` route). Out: Pygments' HTML, from a
child process (server/web/highlight_child.py), or `HighlightRefused` saying why not.

Pygments is pure Python, and its LLVM lexer is super-linear on crafted input (16 KiB of
`a.a.a` took 4 s, 90 KiB past a minute): run in the web tier, one request stalled every
stream beside it. A thread cannot be stopped and holds the interpreter lock inside the
lexer's regular expressions; a child process can be killed. So each request is handed to
an idle child (`size` at most: all started by `warm()` when the server starts, else on
first use; a child says when it is ready), waits for its answer with the child's pipes
polled (cooperative under gevent), and past `deadline_s` the child is killed and a fresh
one takes its place on the next request. One request per client address at a time, so
one client cannot hold every child.

A request that finds every child busy waits its turn, and is refused (503) at once only
when `waiting` requests wait already. Its wait is not on a clock of its own: each child
it waits for answers or is killed within its start-up and deadline, so the wait is
bounded by them, and a host too loaded to start children quickly makes requests slow, not
refused (a 5 s wait for an idle child ran out while two children were still starting).
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
    """Up to `size` highlighting children; at most `waiting` requests wait for one."""

    size: int
    deadline_s: float
    memory_mb: int
    repo_dir: str
    waiting: int = 0  # 0: twice `size`
    started: int = 0  # children started so far (the warm-up's and replacements)
    _idle: queue.LifoQueue[_Child | None] = field(default_factory=queue.LifoQueue)
    _clients: dict[str, int] = field(default_factory=dict)
    _waiters: int = 0
    # Made when the pool is (after gevent patched threading, in a gunicorn worker).
    _lock: threading.Lock = field(default_factory=lambda: threading.Lock())

    def __post_init__(self) -> None:
        self.size = max(1, self.size)
        self.waiting = self.waiting or 2 * self.size
        for _ in range(self.size):
            self._idle.put(None)  # a slot; its child starts at warm-up or when first used

    def warm(self) -> threading.Thread:
        """Start every child now, in the background (a greenlet under gevent), so a
        server's first highlights find them ready; the thread, to join."""
        thread = threading.Thread(target=self._warm_all, name="highlight-warm", daemon=True)
        thread.start()
        return thread

    def _warm_all(self) -> None:
        slots = []
        for _ in range(self.size):
            try:
                slots.append(self._idle.get_nowait())
            except queue.Empty:  # requests took the rest: they start their own
                break
        for slot in slots:
            child = None
            try:
                child = slot if slot is not None and slot.alive() else self._ready_child()
            except (OSError, HighlightRefused):
                child = None  # the next request tries again
            finally:
                self._idle.put(child)

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

    def _take(self) -> _Child | None:
        """An idle child (None: a slot whose child is to start), after the requests
        waiting before this one; 503 when `waiting` requests wait already."""
        with self._lock:
            if self._waiters >= self.waiting:
                raise HighlightRefused("busy highlighting, try again", 503)
            self._waiters += 1
        # Each child ahead is free within its start and deadline; the bound only guards
        # against a slot never given back.
        bound = (self.waiting // self.size + 1) * (START_S + self.deadline_s)
        try:
            return self._idle.get(timeout=bound)
        except queue.Empty:
            raise HighlightRefused("busy highlighting, try again", 503) from None
        finally:
            with self._lock:
                self._waiters -= 1

    def _in_child(self, ask: bytes) -> str:
        child = self._take()
        try:
            if child is None or not child.alive():
                child = self._ready_child()
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

    def _ready_child(self) -> _Child:
        """A child started now, once it has said it is ready."""
        proc = subprocess.Popen(CHILD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, cwd=self.repo_dir,
                                preexec_fn=_limits(self.memory_mb))
        child = _Child(proc)
        with self._lock:
            self.started += 1
        try:
            _exchange(proc, b"", time.monotonic() + START_S, send=False)
        except BaseException:
            child.kill()
            raise
        return child


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
