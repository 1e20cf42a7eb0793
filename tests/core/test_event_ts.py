"""The TypeScript event types (extension/src/events.generated.ts) are generated from the
same schema as the Python dataclasses (compiler/event_ts.py): the checked-in file is what
the generator prints, so a field added to an event reaches the extension's type check."""

from __future__ import annotations

import json

from kernelscope.compiler.event_schema import SCHEMA_PATH, json_schema
from kernelscope.compiler.event_ts import TS_PATH, generate, ts_type


def test_the_checked_in_types_are_generated_from_the_schema() -> None:
    assert json.loads(SCHEMA_PATH.read_text()) == json_schema()
    assert TS_PATH.read_text() == generate(json_schema()), (
        "run: PYTHONPATH=$PWD python -m kernelscope.compiler.event_ts --write")


def test_every_stage_payload_and_field_is_typed() -> None:
    text = TS_PATH.read_text()
    for stage in json.loads(SCHEMA_PATH.read_text())["x-stages"]:
        assert f"  {stage}: " in text, stage
    assert "export interface BuiltKernel {" in text
    assert "  gpu_target?: string | null;" in text
    assert "  ms: number | null;" in text


def test_schema_nodes_map_to_typescript() -> None:
    assert ts_type({"anyOf": [{"type": "integer"}, {"type": "null"}]}) == "number | null"
    assert ts_type({"type": "array", "items": {"$ref": "#/$defs/StageLines"}}) == "StageLines[]"
    assert ts_type({"type": "object", "additionalProperties": {"type": "string"}}) \
        == "Record<string, string>"
    assert ts_type({"enum": ["a", "b"]}) == '"a" | "b"'
