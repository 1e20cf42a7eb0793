"""`progress`: a long stage says what it is doing while it runs (compiler/progress.py), in
one numbered stream with the stage's own events, from the compiler's process to the
server's job (server/jobs/phase.py: a front's progress is streamed, conformed, as the
snippet's; a back half's is the compiler's and is no stage's report)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ks_schema import check_stream

from kernelscope.compiler.events import types as ev
from kernelscope.compiler.events.stage import StageEvent
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline
from kernelscope.compiler.progress import Heartbeat
from kernelscope.server.jobs.manager import Job, JobRequest
from kernelscope.server.jobs.phase import PhasePolicy
from kernelscope.server.jobs.trust import StageOrigin

OPTS = CompileOptions(device="cpu", backend="cpp", profile=False)
# The snippet's module sleeps while `source` runs it: a stage quiet for over a second.
SLOW_SOURCE = """import time

import torch

time.sleep(1.2)


@torch.compile
def f(x):
    return torch.relu(x) + 1.0


f(torch.randn(8))
"""


def _wait_for(cond: Any, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.02)


def test_a_quiet_stage_says_what_it_does_and_stops_at_its_end() -> None:
    got: list[ev.Progress] = []
    beat = Heartbeat(got.append, quiet_s=0.1)
    with beat.stage("compile", "g++ builds 2 graphs' libraries"):
        beat.doing("graph 1's library built", 1, 2)
        _wait_for(lambda: len(got) >= 2)
    n = len(got)
    time.sleep(0.4)
    assert n >= 2 and len(got) == n, "nothing is said once the stage is over"
    last = got[-1]
    assert (last.stage, last.doing, last.done, last.total) == (
        "compile", "graph 1's library built", 1, 2)
    assert last.message.startswith("compile: graph 1's library built [1/2] (")
    assert last.stage_s > 0


def test_an_event_sent_inside_a_stage_starts_the_quiet_time_again() -> None:
    order: list[str] = []
    beat = Heartbeat(lambda p: order.append("progress"), quiet_s=0.3)
    with beat.stage("capture"):
        # An event every 0.1 s: the stream is never quiet for 0.3 s, so no heartbeat.
        for _ in range(8):
            beat.send(lambda: order.append("capture_graph"))
            time.sleep(0.1)
    assert order == ["capture_graph"] * 8


def test_nobody_reading_means_no_thread_and_no_event() -> None:
    beat = Heartbeat(None, quiet_s=0.01)
    with beat.stage("capture", "x"):
        time.sleep(0.05)
    assert beat.thread is None


def test_the_pipeline_streams_progress_in_its_numbered_stream(tmp_path: Path) -> None:
    path = tmp_path / "snippet.py"
    path.write_text(SLOW_SOURCE)
    parts: list[StageEvent] = []
    events = list(run_pipeline(SLOW_SOURCE, OPTS, str(path), parts=parts.append))
    progress = [e for e in parts if e.stage == "progress"]
    assert any(e.data["stage"] == "source" for e in progress), [e.data for e in progress]
    assert all(e.data["message"].startswith(e.data["stage"]) for e in progress)
    stream = sorted([*parts, *events], key=lambda e: e.seq)
    check_stream([e.to_dict() for e in stream])  # one numbering, each event valid
    # Without a taker nothing is made: the events at the end are the stages' own.
    quiet = list(run_pipeline(SLOW_SOURCE, OPTS, str(path)))
    assert not [e for e in quiet if e.stage == "progress"]


def test_the_server_streams_a_fronts_progress_conformed_as_the_snippets() -> None:
    job = Job("j", JobRequest("x = 1\n", {"device": "cpu"}))
    front = PhasePolicy.front(job)
    front.take("progress", {"stage": "capture", "doing": "d", "message": "capture: d",
                            "made_up": 1}, 0.0)
    front.take("source", {"code": "x = 1\n"}, 1.0)
    front.take("progress", {"stage": "capture", "doing": "e", "message": "capture: e"}, 0.0)
    published = job.events
    assert [e["stage"] for e in published] == ["progress", "source", "progress"]
    assert published[0]["data"] == {"stage": "capture", "doing": "d", "message": "capture: d"}
    assert {e["origin"] for e in published} == {"snippet"}
    assert front.stages == ["source"]  # a heartbeat is no stage's report


def test_a_back_halfs_progress_is_the_compilers_and_no_stage_of_its_own() -> None:
    order = StageOrigin()
    assert order.origin("progress") == "compiler"
    # An error before the back half reported a stage is still about the bundle.
    assert order.origin("error", {"kind": "bundle"}) == "snippet"
