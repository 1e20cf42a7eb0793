"""Checking an event against the event schema (docs/events.schema.json), without a
JSON Schema library: the schema compiler/events/types.py generates uses only `type`,
`enum`, `const`, `anyOf`, `items`, `properties`, `required`, `additionalProperties`,
`$ref`, `allOf` with `if`/`then` on the stage, and `minimum`; this reads exactly those.

Used where events arrive from outside (an imported trace: compiler/trace/reader.py), so
nothing the UI renders has a shape the schema does not allow.
"""

from __future__ import annotations

import functools
from typing import Any

from kernelscope.compiler.events.schema import json_schema

MAX_ERRORS = 5
_TYPES: dict[str, Any] = {"object": dict, "array": list, "string": str, "boolean": bool,
                          "null": type(None)}


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return json_schema()


def event_errors(event: Any) -> list[str]:
    """What is wrong with one event (empty: it follows the schema)."""
    schema = _schema()
    errors: list[str] = []
    _check(event, schema, schema["$defs"], "event", errors)
    return errors[:MAX_ERRORS]


def _type_ok(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def _check(value: Any, schema: dict[str, Any], defs: dict[str, Any], where: str,
           errors: list[str]) -> None:
    if len(errors) >= MAX_ERRORS:
        return
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: expected {schema['const']!r}")
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {str(value)[:40]!r} is not one of {schema['enum'][:8]}")
        return
    if "anyOf" in schema:
        for option in schema["anyOf"]:
            trial: list[str] = []
            _check(value, option, defs, where, trial)
            if not trial:
                break
        else:
            errors.append(f"{where}: matches none of its allowed types")
            return
    kind = schema.get("type")
    if kind is not None and not _type_ok(value, kind):
        errors.append(f"{where}: expected {kind}, got {type(value).__name__}")
        return
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{where}: below {schema['minimum']}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _check(item, schema["items"], defs, f"{where}[{i}]", errors)
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: missing {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                _check(value[key], sub, defs, f"{where}.{key}", errors)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in schema.get("properties", {}):
                    _check(item, extra, defs, f"{where}.{key}", errors)
        for rule in schema.get("allOf", []):
            stage = rule.get("if", {}).get("properties", {}).get("stage", {}).get("const")
            if stage is not None and value.get("stage") == stage:
                _check(value, rule["then"], defs, where, errors)
