"""Issue 30, a weak row: a front process wrote 4 x 4 MiB `done` lines; each was parsed in the
web tier (2.1-2.4 s each) and none counted toward the trace cap. Every line now counts
before it is parsed."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import pytest

from kernelscope.server.config import default_config
from kernelscope.server.jobs import relay as relay_mod
from kernelscope.server.jobs.manager import Job, JobRequest
from kernelscope.server.jobs.relay import Relay
from kernelscope.server.sandbox.launch import Limits


def _done_line(size: int) -> bytes:
    pad = "0," * (size // 2 - 40)
    return (json.dumps({"schema": 1, "seq": 0, "stage": "done", "ms": 0,
                        "data": {"ok": True, "pad": "PAD"}}).replace('"PAD"', f"[{pad}0]")
            + "\n").encode()


def test_ignored_done_lines_count_toward_the_trace_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    limits = Limits.from_config({**default_config(), "TRACE_LIMIT_MB": 8,
                                 "EVENT_LIMIT_KB": 4096, "OUTPUT_LIMIT_MB": 64})
    parsed: list[int] = []
    real = relay_mod.parse_event

    def counting(line: bytes) -> Any:
        parsed.append(len(line))
        return real(line)

    monkeypatch.setattr(relay_mod, "parse_event", counting)
    job = Job("j", JobRequest("x = 1", {}, None))
    sunk: list[str] = []
    relay = Relay(job, limits, lambda e, _: e.data, lambda stage, *_: sunk.append(stage),
                  lambda: False, until_done=False)  # a front: the snippet writes its channel
    read, write = os.pipe()
    line = _done_line((4 << 20) - 4096)  # just under EVENT_LIMIT_KB
    writer = threading.Thread(target=lambda: (os.write(write, line * 4), os.close(write)))
    writer.start()
    try:
        outcome = relay.run(read, None, time.monotonic() + 60)
    finally:
        os.close(read)
        writer.join(10)
    assert outcome.reason == "trace", outcome
    assert len(parsed) <= 2 and sunk == []


def test_a_full_scratch_is_the_jobs_error_with_a_permalink(
        make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30, a weak row: a snippet that filled its scratch (one tmpfs for both halves)
    before the server took its bundle made the copy raise ENOSPC: 'the job supervisor
    failed', no permalink."""
    import errno

    from server_support import compile_events, first_error

    from kernelscope.server.jobs import worker

    def full(*_: Any) -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(worker, "take_bundle", full)
    client = make_app().test_client()
    events = compile_events(client, "x = 1\n")
    error = first_error(events)
    assert error["kind"] == "sandbox" and "scratch" in error["message"], error
    done = events[-1]
    assert done["stage"] == "done" and done["data"]["trace_id"], done
    assert client.get(f"/api/traces/{done['data']['trace_id']}").status_code == 200
