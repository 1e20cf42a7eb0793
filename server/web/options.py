"""Compile options over HTTP: which CompileOptions fields a request may set, and what each
one does (`GET /api/options`, the web UI's option controls).

In: `kernelscope.compiler.options.CompileOptions` (its fields, defaults and the one-line comment or
`help` metadata beside each field). Out: a JSON list the UI renders as controls, and
`parse_options`, which checks a request's options against that same list. The compiler's
dataclass is the one place options are defined; nothing here copies their names.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from functools import lru_cache
from typing import Any

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.devices import CPU, DEVICES
from kernelscope.compiler.options import CompileOptions
from kernelscope.server.web.errors import ApiError

# Fields a request may not set: where the worker caches (or writes a run's trace), which
# entry the server resolves, and free-form extras.
SERVER_ONLY = frozenset({"cache_dir", "trace_dir", "entry", "extra"})
CHOICES: dict[str, tuple[str, ...]] = {"device": DEVICES,
                                       "backend": tuple(targets.choices())}
# What the UI shows for a choice, where that is not the value itself.
LABELS: dict[str, dict[str, str]] = {"backend": targets.labels()}
INT_RANGE = (0, 1 << 20)
FLOAT_RANGE = (0.0, 1e3)


def _comments() -> dict[str, str]:
    """The `# ...` comment after each field in the dataclass source."""
    try:
        source = inspect.getsource(CompileOptions)
    except (OSError, TypeError):
        return {}
    found = {}
    for m in re.finditer(r"^\s+(\w+): [^=\n]+=[^#\n]*#\s*(.+)$", source, re.M):
        found[m.group(1)] = m.group(2).strip()
    return found


@lru_cache(maxsize=1)
def option_fields() -> list[dict[str, Any]]:
    comments = _comments()
    out = []
    for f in dataclasses.fields(CompileOptions):
        if f.name in SERVER_ONLY:
            continue
        default = f.default if f.default is not dataclasses.MISSING else None
        kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(default), "str")
        entry: dict[str, Any] = {"name": f.name, "type": kind, "default": default,
                                 "help": f.metadata.get("help") or comments.get(f.name, "")}
        if f.name in CHOICES:
            entry["choices"] = list(CHOICES[f.name])
            if f.name in LABELS:
                entry["labels"] = LABELS[f.name]
        elif kind == "int":
            entry["min"], entry["max"] = INT_RANGE
        elif kind == "float":
            entry["min"], entry["max"] = FLOAT_RANGE
        out.append(entry)
    return out


def parse_options(raw: Any) -> dict[str, Any]:
    """A request's options, checked against option_fields(); device, backend, fusion and
    inductor are always present (backend "auto" stays: the compiler resolves it)."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ApiError("options must be an object")
    fields = {f["name"]: f for f in option_fields()}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        raise ApiError(f"unknown option(s): {', '.join(map(str, unknown))}")
    opts: dict[str, Any] = {}
    for name, value in raw.items():
        opts[name] = _check(fields[name], value)
    opts.setdefault("device", CPU)
    opts.setdefault("backend", targets.AUTO)
    opts.setdefault("fusion", True)
    opts.setdefault("inductor", False)
    return opts


def _check(field: dict[str, Any], value: Any) -> Any:
    name, kind = field["name"], field["type"]
    if "choices" in field:
        if value not in field["choices"]:
            raise ApiError(f"options.{name} must be one of {', '.join(field['choices'])}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise ApiError(f"options.{name} must be true or false")
        return value
    if kind in ("int", "float"):
        types = int if kind == "int" else (int, float)
        ok = isinstance(value, types) and not isinstance(value, bool)
        if not ok or not field["min"] <= value <= field["max"]:
            raise ApiError(f"options.{name} must be a{'n integer' if kind == 'int' else ' number'} "
                           f"from {field['min']} to {field['max']}")
        return float(value) if kind == "float" else value
    if not isinstance(value, str) or len(value) > 200:
        raise ApiError(f"options.{name} must be a short string")
    return value
