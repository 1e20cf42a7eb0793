"""The TypeScript event types (webui/types/events.d.ts) are generated from the same schema
as the Python dataclasses (compiler/events/ts.py): the checked-in file is what the generator
prints, so a field added to an event reaches the type checks of both TypeScript readers,
the web UI's JavaScript and the extension, which use that one file."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from kernelscope.compiler.events.schema import SCHEMA_PATH, json_schema
from kernelscope.compiler.events.ts import HEADER, ROOT, TS_PATH, generate, ts_type


def test_the_checked_in_types_are_generated_from_the_schema() -> None:
    """A schema change that is not regenerated fails here."""
    assert json.loads(SCHEMA_PATH.read_text()) == json_schema()
    assert TS_PATH.read_text() == generate(json_schema()), (
        f"{TS_PATH.name}: run PYTHONPATH=$PWD python -m kernelscope.compiler.events.ts --write")


def _tsconfig_includes(path: Path) -> list[Path]:
    """The files and globs a tsconfig.json includes, resolved (comments allowed, as tsc does)."""
    text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.M)
    return [(path.parent / p).resolve() for p in json.loads(text)["include"]]


def _copies(root: Path, files: list[str]) -> list[str]:
    """Files (relative to `root`) that carry the generator's header, other than the one it
    writes."""
    rel = TS_PATH.relative_to(ROOT).as_posix()
    return [f for f in files if f != rel and (root / f).is_file()
            and HEADER in (root / f).read_text(errors="replace")]


def test_one_generated_file_serves_both_typescript_readers() -> None:
    """The web UI's and the extension's tsconfig both include webui/types/events.d.ts, and
    no second copy of the generated text is kept (a copy would be a second place to update)."""
    assert TS_PATH in _tsconfig_includes(ROOT / "extension" / "tsconfig.json")
    assert TS_PATH.parent / "*.d.ts" in _tsconfig_includes(ROOT / "webui" / "tsconfig.json")
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert TS_PATH.relative_to(ROOT).as_posix() in files
    assert not _copies(ROOT, files)


def test_the_copy_check_sees_a_planted_copy(tmp_path: Path) -> None:
    text = generate(json_schema())
    for rel, body in (("extension/src/events.generated.ts", text),
                      ("webui/types/events.d.ts", text),
                      ("extension/src/protocol.ts", "export {};\n")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(body)
    files = ["extension/src/events.generated.ts", "webui/types/events.d.ts",
             "extension/src/protocol.ts"]
    assert _copies(tmp_path, files) == ["extension/src/events.generated.ts"]


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
