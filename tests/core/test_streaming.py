"""Streaming from the first moment: `source` before Dynamo's first graph, and each captured
graph as its own `capture_graph` event the moment AOTAutograd hands it over, while the
snippet's call goes on (compiler/pipeline.py run_front, compiler/capture/dynamo.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from ks_schema import check_stream

from kernelscope.compiler.events.stage import StageEvent
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline

OPTS = CompileOptions(device="cpu", backend="cpp", profile=False)
MARK = "KERNELSCOPE_TEST_BETWEEN_GRAPHS"

# Between its two graphs the snippet's own Python runs (the graph break, which Dynamo does
# not trace) and leaves a mark the test can see: a graph streamed before the mark was
# streamed before Dynamo went on.
BROKEN = f"""import os
import torch


@torch.compile
def two(x):
    y = torch.sin(x) * 2.0
    os.environ[{MARK!r}] = "1"  # Dynamo cannot trace putenv: the graph breaks here
    return torch.cos(y) + 1.0


two(torch.randn(64))
"""


def _write(tmp_path: Path, code: str) -> str:
    path = tmp_path / "snippet.py"
    path.write_text(code)
    return str(path)


def test_each_graph_streams_as_dynamo_captures_it(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MARK, raising=False)
    seen: list[tuple[str, Any, str | None]] = []  # (stage, graph id, the mark then)
    parts: list[StageEvent] = []

    def part(event: StageEvent) -> None:
        parts.append(event)
        if event.stage != "progress":  # a stage that ran long says what it does (not here)
            seen.append((event.stage, event.data["id"], os.environ.get(MARK)))

    events = []
    for event in run_pipeline(BROKEN, OPTS, _write(tmp_path, BROKEN), parts=part):
        seen.append((event.stage, None, os.environ.get(MARK)))
        events.append(event)
        if event.stage == "source":  # `source` ran the snippet eagerly once: capture is next
            os.environ.pop(MARK, None)
    stages = [s for s, _, _ in seen]
    assert stages[:4] == ["source", "capture_graph", "capture_graph", "capture"], stages
    # Graph 0 reached the stream before the snippet's code after the break ran; graph 1
    # after it (Dynamo compiles the rest of the function only when it is called).
    assert seen[1] == ("capture_graph", 0, None)
    assert seen[2] == ("capture_graph", 1, "1")
    capture = next(e for e in events if e.stage == "capture")
    assert len(capture.data["graphs"]) == 2 and len(capture.data["graph_breaks"]) == 1
    # Numbered in one sequence with the events the generator yields.
    stream = sorted([*parts, *events], key=lambda e: e.seq)
    assert [e.seq for e in stream] == list(range(len(stream)))
    check_stream([e.to_dict() for e in stream])


def test_without_a_taker_the_graphs_come_just_before_capture(tmp_path: Path) -> None:
    events = [e.to_dict() for e in run_pipeline(BROKEN, OPTS, _write(tmp_path, BROKEN))]
    stages = [e["stage"] for e in events]
    assert stages[:4] == ["source", "capture_graph", "capture_graph", "capture"], stages
    check_stream(events)  # one part per graph, each the graph capture then lists
