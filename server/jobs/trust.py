"""Who said what: each event's origin set by its stage, and snippet-made payloads conformed.

In: an event (stage, data) from a worker process, the phase it came from and the job's
request. Out: its origin (`snippet`, `compiler`) and the data to publish.

The snippet runs in the same process as the capture half, so it can rewrite anything that
half produces, the capture bundle included: its `source`, its `capture`, its `error`.
The back half (a process that never ran the snippet) replays those from the bundle, and
a label inside the data proves nothing. So the server decides by stage, never by label:

- `source`, `capture_graph` and `capture` are the snippet's, always; so is an `error` the
  back half sends before it has reported a stage of its own (it can only be about the
  bundle: a replayed error, or a bundle the back half refused);
- everything the back half reports from `lowering` on is the compiler's, but for an
  `error` of kind `graph`: the snippet's graph itself raises (compiler/blame.py; a kind
  can only move an error to the snippet, never to the compiler);
- `source.code` is re-derived from the submitted code. A split job streams the front's own
  `source` (so it is on screen before capture ends): its options, backend and versions
  are the front process's words, like the rest of it; where the front sent none, the back
  half replays one and states those there itself (compiler/pipeline.py
  `_replayed_source`);
- snippet-made payloads are conformed to the generated event types (compiler/
  event_types.py, the model behind docs/events.schema.json): keys the type does not list
  are dropped, values of the wrong type dropped, strings and lists capped. So a snippet
  cannot add `speedup_vs_eager` or `verified_by`, nor a megabyte of anything.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Literal

from kernelscope.compiler.events.types import PAYLOADS
from kernelscope.server.jobs.manager import JobRequest

SNIPPET_STAGES = ("source", "capture_graph", "capture")
SNIPPET_GRAPH = "graph"  # an error's kind: the snippet's graph fails run eagerly (blame.py)
LABELLED = ("source", "capture")  # payloads that say `"origin": "snippet"` themselves
STRING_CAP = 64 * 1024  # characters of one string a snippet-made payload may hold
CODE_CAP = 256 * 1024  # ... for a graph's code (the FX code of a large model is long)
LIST_CAP = 20000  # items of one list
DEPTH_CAP = 24
_DROP = object()


class StageOrigin:
    """Decides the origin of each event of one back-half process, in order."""

    def __init__(self) -> None:
        self.own_stage_seen = False  # the back half has reported a stage of its own

    def origin(self, stage: str, data: dict[str, Any] | None = None) -> str:
        if stage in SNIPPET_STAGES:
            return "snippet"
        if stage == "error":
            graph = isinstance(data, dict) and data.get("kind") == SNIPPET_GRAPH
            return "compiler" if self.own_stage_seen and not graph else "snippet"
        if stage not in ("done", "progress"):  # a heartbeat is no stage's report
            self.own_stage_seen = True
        return "compiler"


def conform_payload(stage: str, data: dict[str, Any], request: JobRequest) -> dict[str, Any]:
    """A snippet-made payload as its event type allows (see the module docstring)."""
    result = conform_data(stage, data)
    if stage == "source":
        result["code"] = request.code  # what was submitted, not what the snippet says
    if stage in LABELLED:
        result["origin"] = "snippet"
    return result


def conform_data(stage: str, data: Any) -> dict[str, Any]:
    """Someone else's payload as the stage's event type allows (listed keys, listed types,
    strings and lists capped); {} for a stage without a type."""
    cls = PAYLOADS.get(stage)
    out = _conform(data, cls, 0) if cls is not None else None
    return out if isinstance(out, dict) else {}


@cache
def _fields(cls: type) -> dict[str, tuple[Any, bool]]:
    """name -> (type, required) of each field of a payload dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: (hints[f.name], f.default is dataclasses.MISSING
                     and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(cls)}


# Scalar types -> does a value conform (bool is not an int here, an int is a float).
_SCALARS: dict[type, Callable[[Any], bool]] = {
    type(None): lambda v: v is None,
    bool: lambda v: isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def _conform(value: Any, tp: Any, depth: int, item: bool = False) -> Any:
    """`value` as type `tp`, or _DROP when it cannot be. `item`: an object in a list, which
    is dropped whole when a required field is missing or mistyped (a payload's top level
    keeps what conforms)."""
    if depth > DEPTH_CAP:
        return _DROP
    origin = typing.get_origin(tp)
    if tp is Any:
        return _plain(value, depth)
    if isinstance(tp, type) and tp in _SCALARS:
        return value if _SCALARS[tp](value) else _DROP
    if tp is str:
        return value[:STRING_CAP] if isinstance(value, str) else _DROP
    if origin is Literal:
        return value if value in typing.get_args(tp) else _DROP
    if origin in (typing.Union, types.UnionType):
        outs = (_conform(value, option, depth) for option in typing.get_args(tp))
        return next((out for out in outs if out is not _DROP), _DROP)
    if origin is list:
        return _conform_list(value, tp, depth)
    if origin is dict:
        return _conform_dict(value, tp, depth)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _conform_object(value, tp, depth, item)
    return _DROP


def _conform_list(value: Any, tp: Any, depth: int) -> Any:
    if not isinstance(value, list):
        return _DROP
    (of,) = typing.get_args(tp)
    items = (_conform(v, of, depth + 1, item=True) for v in value[:LIST_CAP])
    return [v for v in items if v is not _DROP]


def _conform_dict(value: Any, tp: Any, depth: int) -> Any:
    if not isinstance(value, dict):
        return _DROP
    _, of = typing.get_args(tp)
    pairs = ((str(k)[:200], _conform(v, of, depth + 1, item=True))
             for k, v in list(value.items())[:LIST_CAP])
    return {k: v for k, v in pairs if v is not _DROP}


def _conform_object(value: Any, tp: type, depth: int, item: bool) -> Any:
    """A payload dataclass: listed keys of the listed types only; a missing or mistyped one
    is left out (readers treat it as absent), the rest of the object stays."""
    if not isinstance(value, dict):
        return _DROP
    fields: dict[str, Any] = {}
    for name, (ftype, required) in _fields(tp).items():
        conformed = _conform(value[name], ftype, depth + 1) if name in value else _DROP
        if name == "code" and isinstance(value.get(name), str):
            conformed = value[name][:CODE_CAP]
        if conformed is not _DROP:
            fields[name] = conformed
        elif required and item:
            return _DROP
    return fields


def _plain(value: Any, depth: int) -> Any:
    """A value of an untyped field (`Any`): JSON data, capped like the rest."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:STRING_CAP]
    if depth > DEPTH_CAP:
        return None
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value[:LIST_CAP]]
    if isinstance(value, dict):
        return {str(k)[:200]: _plain(v, depth + 1) for k, v in list(value.items())[:LIST_CAP]}
    return None
