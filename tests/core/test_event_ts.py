"""The TypeScript event types (extension/src/events.generated.ts) are generated from the
same schema as the Python dataclasses (compiler/event_ts.py): the checked-in file is what
the generator prints, so a field added to an event reaches the extension's type check."""

from __future__ import annotations

import json

from kernelscope.compiler.event_schema import SCHEMA_PATH, json_schema
from kernelscope.compiler.event_ts import TS_PATH, TS_PATHS, WEBUI_TS_PATH, generate, ts_type


def test_the_checked_in_types_are_generated_from_the_schema() -> None:
    """Both copies (the extension's module, the web UI's declarations) are the generator's
    text: a schema change that is not regenerated fails here."""
    assert json.loads(SCHEMA_PATH.read_text()) == json_schema()
    assert set(TS_PATHS) == {TS_PATH, WEBUI_TS_PATH}
    for path in TS_PATHS:
        assert path.read_text() == generate(json_schema()), (
            f"{path.name}: run PYTHONPATH=$PWD python -m kernelscope.compiler.event_ts --write")


def test_the_event_type_ties_each_stage_to_its_payload() -> None:
    text = generate(json_schema())
    assert "export interface EventOf<S extends StageName> {\n  schema: 1;\n  seq: number;\n" \
           "  stage: S;\n  ms: number;\n  data: Payloads[S];\n" \
           '  origin?: "snippet" | "compiler" | "server";\n}' in text
    assert "export type StageEvent = { [S in StageName]: EventOf<S> }[StageName];" in text
    assert "  done: JobDone;" in text and "  wall_ms?: number | null;" in text


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
