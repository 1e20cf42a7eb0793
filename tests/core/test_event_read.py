"""Python reads events through the dataclasses (compiler/events/read.py): an event dict as
stored or streamed comes back as its stage's payload class, checked against the schema,
and the readers (the terminal report, benchmarks/check_samples.py) use its attributes, so
a field renamed in the model fails their type check."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelscope.compiler.events import types as ev
from kernelscope.compiler.events.read import (
    Event,
    EventError,
    data_as,
    envelope,
    field_of,
    from_dict,
    latest,
    parse_event,
    payload,
)
from kernelscope.compiler.report import render

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "events"


def _golden(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text())
    return data


def _event(stage: str, data: Any, seq: int = 0) -> dict[str, Any]:
    return {"schema": 1, "seq": seq, "stage": stage, "ms": 1.5, "data": data}


def test_stored_events_come_back_as_their_dataclasses_and_round_trip() -> None:
    for path in sorted(GOLDEN.glob("*.json")):
        for stage, data in json.loads(path.read_text()).items():
            event = parse_event(_event(stage, data))
            assert type(event.data) is ev.PAYLOADS[stage]
            assert ev.to_json(event.data) == data, (path.name, stage)
    lowering = parse_event(json.dumps(_event("lowering", _golden("softmax_cpp")["lowering"])))
    buf = payload(lowering, ev.Lowering).graphs[0].buffers[0]
    assert isinstance(buf, ev.Buffer) and isinstance(buf.reads[0], ev.Read)


def test_unions_and_optional_objects_take_their_member_type() -> None:
    prof = from_dict(ev.Profile, {"measured": True, "inductor": {
        "code": ["x"], "kernels": [{"name": "k", "language": "triton", "source": ""}]}})
    assert isinstance(prof.inductor, ev.InductorOutput)
    assert isinstance(prof.inductor.kernels[0], ev.InductorKernel)
    built = from_dict(ev.BuiltKernel, {"name": "k", "ms": None, "line_maps": {
        "ptx": [{"first": 1, "last": 2, "kernel_lines": [3]}]}})
    assert built.line_maps is not None and isinstance(built.line_maps["ptx"][0], ev.StageLines)
    assert from_dict(ev.Profile, {"measured": False, "inductor": None}).inductor is None


def test_an_unknown_stage_or_an_event_off_the_schema_is_a_clear_error() -> None:
    with pytest.raises(EventError, match=r"unknown event stage 'linking' \(known: source, "):
        parse_event(_event("linking", {}))
    with pytest.raises(EventError, match="not follow the event schema: .*missing 'ok'"):
        parse_event(_event("done", {"trace_id": "t"}))
    with pytest.raises(EventError, match=r"event.data.ok: expected boolean"):
        parse_event(_event("done", {"ok": "yes"}))
    with pytest.raises(EventError, match="one JSON object"):
        parse_event("{not json")
    with pytest.raises(EventError, match="carries JobDone, not Run"):
        payload(parse_event(_event("done", {"ok": True})), ev.Run)


def test_a_field_renamed_in_the_data_fails_the_read() -> None:
    data = _golden("add_relu_cpp")["memory"]
    for g in data["graphs"]:
        for b in g["buffers"]:
            b["reuses"] = b.pop("reused_from")
    with pytest.raises(EventError, match=r"graphs\[0\].buffers\[0\]: missing 'reused_from'"):
        parse_event(_event("memory", data))


def test_the_terminal_report_and_the_sample_table_read_typed_events() -> None:
    events = [_event(stage, data, seq)
              for seq, (stage, data) in enumerate(_golden("add_relu_cpp").items())]
    events += [_event("error", {"stage": "run", "kind": "mismatch", "message": "differs",
                                "line": 3}, len(events)),
               {**_event("done", {"ok": False, "trace_id": None}, len(events) + 1),
                "origin": "server"}]
    typed = [parse_event(e) for e in events]
    assert typed[-1] == Event(len(events) - 1, "done", 1.5, ev.JobDone(ok=False), "server")
    assert latest(typed, ev.Run) is None and latest(typed, ev.Done) == ev.JobDone(ok=False)
    text = render(typed[2])
    assert text.startswith("\n== memory (1.5 ms) ")
    assert "peak " in text and " B with reuse" in text
    assert render(typed[-2]).endswith("mismatch error in stage run at line 3: differs")

    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.check_samples import summarize
    finally:
        sys.path.remove(str(ROOT))
    row = summarize("add_relu", events, "")
    assert row == {"sample": "add_relu", "ok": False, "kernels": 1, "extern": 0,
                   "eager_ms": None, "kernelscope_ms": None, "inductor_ms": None,
                   "error": "run: differs"}
    bad = summarize("x", [_event("linking", {})], "")
    assert bad["error"].startswith("unreadable events: unknown event stage 'linking'")


def test_an_envelope_reads_what_the_server_holds_without_converting_every_payload() -> None:
    """The server's reads (server/jobs/manager.py, queue.py, relay.py, ...): the stage, seq, ms and
    origin of an event as stored, and the payload of the stages it needs as dataclasses."""
    done = {**_event("done", {"ok": True, "trace_id": "abc", "wall_ms": 3.0}, 7),
            "origin": "server"}
    read = envelope(done)
    assert (read.seq, read.stage, read.ms, read.origin) == (7, "done", 1.5, "server")
    assert data_as(read, ev.JobDone) == ev.JobDone(ok=True, trace_id="abc", wall_ms=3.0)
    assert data_as(read, ev.Done) == ev.Done(ok=True, trace_id="abc")
    assert data_as(read, ev.Error) is None  # another stage's payload
    assert data_as(envelope(_event("error", {"stage": "run", "kind": "exception",
                                             "message": "m"})), ev.Error) == \
        ev.Error("run", "exception", "m")
    assert data_as(envelope(_event("done", {"trace_id": "abc"})), ev.JobDone) is None  # no ok
    assert data_as(envelope(_event("done", ["not", "an", "object"])), ev.JobDone) is None
    # One field of a partial payload (a fake worker's `run` says only `ok`), named as the
    # model names it: a name the model lacks fails at once.
    run = envelope(_event("run", {"ok": True}))
    assert data_as(run, ev.Run) is None and field_of(run, ev.Run, "ok") is True
    assert field_of(read, ev.Run, "ok") is None  # a `done` is not a run
    with pytest.raises(AttributeError, match="Run has no field 'passed'"):
        field_of(run, ev.Run, "passed")
    # Someone else's line (a worker's channel): wrong types read as defaults, never raise.
    odd = envelope({"seq": "7", "stage": 5, "ms": "fast", "data": None})
    assert (odd.seq, odd.stage, odd.ms, odd.data) == (-1, "", 0.0, None)


# The readers, and one field each of them reads, renamed in a copy of the model.
RENAMES = {"class Source:": ("    entry: str\n", "    entry_point: str\n"),
           "class PlannedBuffer:": ("    reused_from: str | None\n", "    reuse_of: str | None\n"),
           "class Profile:": ("    eager_ms: float | None = None\n",
                              "    eager_time_ms: float | None = None\n")}


def mypy_on_renamed_copy(tmp_path: Path, tops: tuple[str, ...], extra: dict[str, tuple[str, ...]],
                         renames: dict[str, tuple[str, str]], targets: list[str]
                         ) -> tuple[list[str], set[tuple[str, str]], str]:
    """mypy over `targets` in a copy of the tree (packages `tops` under kernelscope/, and
    the `extra` files of other folders) whose event model has `renames` applied (class ->
    (old line, new line)): the error lines, the (file, missing attribute) pairs, the log."""
    pkg = tmp_path / "kernelscope"
    for top in tops:
        shutil.copytree(ROOT / top, pkg / top, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "kernelscope" / "__init__.py", pkg / "__init__.py")
    for folder, names in extra.items():
        (tmp_path / folder).mkdir()
        for name in names:
            shutil.copy(ROOT / folder / name, tmp_path / folder / name)
    for cls, (old, new) in renames.items():
        model = next(p for p in (pkg / "compiler" / "events").glob("*.py")
                     if f"\n{cls}" in p.read_text())
        head, tail = model.read_text().split(cls, 1)
        assert old in tail.split("\n\n\n", 1)[0], (cls, old)
        model.write_text(head + cls + tail.replace(old, new, 1))
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
         "--ignore-missing-imports", *targets],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "MYPYPATH": str(tmp_path)})
    errors = [line for line in proc.stdout.splitlines() if ": error:" in line]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = {(line.split(":")[0], m.group(1)) for line in errors
             if (m := re.search(r'has no attribute "(\w+)"', line))}
    return errors, found, proc.stdout


def test_a_field_renamed_in_the_model_breaks_the_readers_type_check(tmp_path: Path) -> None:
    """The readers are on the types: mypy, run on a copy of the tree whose event model
    renames three fields, reports each reader that reads one, and nothing else."""
    pytest.importorskip("mypy")
    errors, found, log = mypy_on_renamed_copy(
        tmp_path, ("compiler",), {"benchmarks": ("__init__.py", "check_samples.py")},
        RENAMES, ["kernelscope/compiler/report.py", "benchmarks/check_samples.py"])
    assert len(found) == len(errors) and found == {
        ("kernelscope/compiler/report.py", "entry"),
        ("kernelscope/compiler/report.py", "reused_from"),
        ("kernelscope/compiler/report.py", "eager_ms"),
        ("benchmarks/check_samples.py", "eager_ms")}, log


# The server's and the scripts' readers, and the `done` fields they read, renamed in a copy.
SERVER_READERS = ("server/jobs/manager.py", "server/jobs/remote.py", "server/jobs/followups.py",
                  "scripts/latency.py", "scripts/load.py")
DONE_RENAMES = {"class Done:": ("    trace_id: str | None = None",
                                "    permalink: str | None = None"),
                "class JobDone(Done):": ("    store_error: str | None = None",
                                         "    store_failure: str | None = None")}


def test_a_done_field_renamed_in_the_model_breaks_the_servers_readers(tmp_path: Path) -> None:
    """The server reads `done` through its dataclass (event_read.data_as): mypy, run on a
    copy whose model renames `trace_id` and `store_error`, reports the readers of each."""
    pytest.importorskip("mypy")
    files = [f"kernelscope/{f}" if f.startswith("server/") else f for f in SERVER_READERS]
    errors, found, log = mypy_on_renamed_copy(
        tmp_path, ("compiler", "server"), {"scripts": ("latency.py", "load.py")},
        DONE_RENAMES, files)
    assert all("has no attribute" in line for line in errors), log  # nothing else
    assert {f for f, _ in found} == set(files), log
    assert {a for _, a in found} == {"trace_id", "store_error"}, log
