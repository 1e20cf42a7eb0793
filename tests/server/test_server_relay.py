"""Issue 30, a weak row: a front process wrote 4 x 4 MiB `done` lines; each was parsed in the
web tier (2.1-2.4 s each) and none counted toward the trace cap. Every line now counts
before it is parsed, and a long one is decoded in short steps. Also the weak row of a full
scratch, and a supervisor's failure, on both tiers."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from server_support import relay_bytes

from kernelscope.server.config import default_config
from kernelscope.server.jobs import inputs
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
    line = _done_line((4 << 20) - 4096)  # just under EVENT_LIMIT_KB
    outcome = relay_bytes(relay, line * 4, 60)
    assert outcome.reason == "trace", outcome
    assert len(parsed) <= 2 and sunk == []


# The RQ tier's workers are other processes, out of this test's monkeypatch.
@pytest.mark.parametrize("backend", ["embedded", "postgres"], indirect=True)
def test_a_full_scratch_is_the_jobs_error_with_a_permalink(
        make_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30, a weak row: a snippet that filled its scratch (one tmpfs for both halves)
    before the server took its bundle made the copy raise ENOSPC: 'the job supervisor
    failed', no permalink. The permalink is stored in SQLite and in PostgreSQL."""
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


# Fills the job's scratch but one page: the front's bundle (under a page) still fits, the
# server's copy of it into back/ does not.
FILL_BUT_A_PAGE = """import os
fd = os.open('fill', os.O_WRONLY | os.O_CREAT)
size = 0
try:
    while True:
        size += os.write(fd, bytes(4096))
except OSError:
    pass
os.ftruncate(fd, size - 4096)
os.close(fd)
"""


@pytest.mark.parametrize("backend", ["embedded", "postgres", "redis"], indirect=True)
def test_a_scratch_filled_for_real_is_the_jobs_error_with_a_permalink(make_app: Any) -> None:
    """The case above, with no fake: the snippet fills its job's tmpfs (SCRATCH_LIMIT_MB)
    itself, so the copy that fails is the worker's own, on the RQ tier a `kernelscope
    worker` process's (which a monkeypatch in this process never reached)."""
    from server_support import compile_events, first_error, state

    app = make_app(SCRATCH_LIMIT_MB=2)
    if not state(app).settings.isolation.tmpfs:
        pytest.skip("a job's scratch is a tmpfs only when the server runs as root")
    client = app.test_client()
    events = compile_events(client, FILL_BUT_A_PAGE)
    error = first_error(events)
    assert error["kind"] == "sandbox" and "scratch" in error["message"], error
    done = events[-1]
    assert done["stage"] == "done" and done["data"]["trace_id"], done
    assert client.get(f"/api/traces/{done['data']['trace_id']}").status_code == 200


@pytest.mark.parametrize("backend", ["embedded", "redis"], indirect=True)
def test_a_failed_supervisor_says_so_on_either_tier(make_app: Any) -> None:
    """A job whose supervisor raised (here: its scratch root cannot be made) ends with an
    error saying so before `done`. An RQ worker's task ended it with `done` alone, an
    unexplained failure (found with the ENOSPC handling above undone)."""
    from server_support import compile_events, first_error

    client = make_app(SCRATCH_ROOT="/proc/self/no-such-dir", WARM_POOL=0).test_client()
    events = compile_events(client, "x = 1\n")
    error = first_error(events)
    assert error["kind"] == "sandbox" and "supervisor failed" in error["message"], error
    assert events[-1]["stage"] == "done" and events[-1]["data"]["ok"] is False


class _Reads:
    """A JSON decoder that records how much text each of its C calls read (a `raw_decode`
    reads up to the value's end)."""

    def __init__(self) -> None:
        self.real = json.JSONDecoder(parse_constant=lambda _c: None)
        self.sizes: list[int] = []

    def decode(self, text: str) -> Any:
        self.sizes.append(len(text))
        return self.real.decode(text)

    def raw_decode(self, text: str, at: int = 0) -> Any:
        value, end = self.real.raw_decode(text, at)
        self.sizes.append(end - at)
        return value, end


@pytest.mark.parametrize("pad", ["0", "{}", '{"a": [1, "x,y"]}', '"s"'])
def test_a_long_line_is_decoded_in_short_steps(monkeypatch: pytest.MonkeyPatch,
                                               pad: str) -> None:
    """json.loads of a crafted 4 MiB line keeps the interpreter lock for its whole run
    (0.3-0.7 s on a loaded host, /api/health waiting); the relay decodes a long line in C
    calls that each read at most STEP_CHARS, with the same result."""
    reads = _Reads()
    monkeypatch.setattr(inputs, "_DECODER", reads)
    count = (1 << 20) // (len(pad) + 1)
    line = ('{"schema": 1, "seq": 0, "stage": "done", "ms": 0, "data": {"ok": true, '
            f'"pad": [{",".join([pad] * count)}]}}}}').encode()
    event = relay_mod.parse_event(line)
    assert event is not None and event.stage == "done"
    assert event.data["pad"] == json.loads(f"[{pad}]") * count
    assert max(reads.sizes) <= inputs.STEP_CHARS + 2, max(reads.sizes)


def test_stepwise_decoding_equals_json_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs cut at a comma inside a string or a nested value, members longer than a step,
    duplicate keys, NaN, white space: all as json.loads has them (short steps, so every
    path runs); what json.loads refuses is refused."""
    monkeypatch.setattr(inputs, "STEP_CHARS", 96)
    monkeypatch.setattr(inputs, "_WINDOWS", (8, 32, 96))
    rnd = random.Random(0)

    def value(depth: int = 0) -> Any:
        if depth > 3 or rnd.random() < 0.3:
            return rnd.choice([0, 12345678901234, 1.5e-7, -3, "a,b", 'x"y,', True, None, "",
                               "[1,2]", '{"a":1}', "é,😀", "a" * 200])
        if rnd.random() < 0.5:
            return [value(depth + 1) for _ in range(rnd.randint(0, 12))]
        return {f"{rnd.choice(['k', 'a,b', 'x'])}{rnd.randint(0, 5)}": value(depth + 1)
                for _ in range(rnd.randint(0, 8))}

    texts = [json.dumps(value(), separators=rnd.choice([(",", ":"), (", ", ": ")]),
                        indent=rnd.choice([None, 1])) for _ in range(600)]
    texts += ['{"a": 1, "b": 2, "a": 3, ' + ", ".join(f'"k{i}": {i}' for i in range(60)) + "}",
              "[NaN, Infinity, -Infinity, " + ", ".join(["123456789"] * 40) + "]",
              "  [ 1 , 2 ] " + " " * 200]
    for text in texts:
        expected = json.loads(text, parse_constant=lambda _c: None)
        assert json.dumps(inputs.loads_stepwise(text)) == json.dumps(expected)
    for bad in ["[1, 2, " * 40 + "3", '{"a": 1,, ' + '"b": 2, ' * 30 + "}",
                "[" + "1, " * 60 + "]", "[1]x" + " " * 200, '{1: 2, ' + '"b": 2, ' * 30 + "}",
                '"abc' + "d" * 200]:
        with pytest.raises(ValueError):
            inputs.loads_stepwise(bad)
