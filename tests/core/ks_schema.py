"""Every event stream checked against docs/events.schema.json (with `jsonschema`), plus the
rules a JSON Schema cannot say: order, numbering, and references that must resolve."""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema

from kernelscope.compiler.events.schema import SCHEMA_PATH
from kernelscope.compiler.events.stage import FOLLOW_UPS, STAGES


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def check_event(e: dict[str, Any]) -> None:
    errors = sorted(validator().iter_errors(e), key=lambda err: list(err.absolute_path))
    assert not errors, f"{e.get('stage')}: " + "; ".join(
        f"{'/'.join(map(str, err.absolute_path))}: {err.message[:200]}" for err in errors[:5])
    stage, data = e["stage"], e["data"]
    if stage == "codegen":
        for g in data["graphs"]:
            for k in g["kernels"]:
                n = len(k["source"].splitlines())
                assert all(1 <= m["line"] <= n for m in k["line_map"])
    if stage == "memory":
        for g in data["graphs"]:
            for b in g["buffers"]:
                assert 0 <= b["first"] <= b["last"] < max(len(g["steps"]), 1)


def check_stream(events: list[dict[str, Any]]) -> None:
    assert [e["seq"] for e in events] == list(range(len(events)))
    stages = [e["stage"] for e in events]
    assert stages[-1] == "done" and stages.count("done") == 1
    order = [s for s in stages if s in STAGES]
    assert order == list(STAGES[:len(order)]), stages
    if "error" in stages:
        assert stages.index("error") == len(stages) - 2
    check_parts(events)
    ids = {}
    for e in events:
        check_event(e)
        if "graphs" in e["data"] and e["stage"] in STAGES:
            ids[e["stage"]] = [g["id"] for g in e["data"]["graphs"]]
    assert len({tuple(v) for v in ids.values()}) <= 1, ids  # one graph list for all stages


def check_parts(events: list[dict[str, Any]]) -> None:
    """`capture_graph`: after `source`, before `capture`, one per graph in order, each the
    graph `capture` then lists; `progress`: names a stage, before `done`; `inductor`: after
    `profile` (our whole result), at most once."""
    stages = [e["stage"] for e in events]
    parts = [i for i, s in enumerate(stages) if s == "capture_graph"]
    if parts:
        assert "source" in stages and stages.index("source") < parts[0], stages
        assert [events[i]["data"]["id"] for i in parts] == list(range(len(parts)))
    if parts and "capture" in stages:
        at = stages.index("capture")
        assert parts[-1] < at, stages
        assert [events[i]["data"] for i in parts] == events[at]["data"]["graphs"]
    for e in events:  # what a stage is doing, while one runs, before the end
        if e["stage"] == "progress":
            assert e["data"]["stage"] in (*STAGES, *FOLLOW_UPS), e
            assert stages.index("done") > events.index(e), stages
    if "inductor" in stages:
        assert stages.count("inductor") == 1 and "profile" in stages
        assert stages.index("profile") < stages.index("inductor"), stages
