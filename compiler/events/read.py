"""Reading events back into their dataclasses: the one way from an event as it is stored or
streamed (a dict, or its JSON line) to the typed payloads of compiler/events/types.py.

In: one event (`{"schema", "seq", "stage", "ms", "data"}`, optionally the server's
`origin`), from a trace, a job's stream, `kernelscope compile --json` or a trace
directory. Out: an `Event` whose `data` is the stage's dataclass (`Source`, `Capture`, ...,
`Error`, `Done`). The event is checked against the schema first (compiler/events/check.py),
so what a reader gets has the types the model says; a reader then touches attributes mypy
knows, and a field renamed in the model breaks the reader's type check instead of a page.

Keys an object carries beyond its dataclass's fields (the schema allows them: a stage may
grow) are not kept: a reader that needs one adds it to the model first.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kernelscope.compiler.events.check import event_errors
from kernelscope.compiler.events.types import PAYLOADS, EventOrigin

T = TypeVar("T")
P = TypeVar("P")


class EventError(ValueError):
    """An event that cannot be read: not JSON, an unknown stage, or off the schema."""


@dataclass(frozen=True)
class Event(Generic[P]):
    """One event with its payload as a dataclass; `origin` is the server's label of the
    process that sent it (docs/server.md), None where no server saw it."""

    seq: int
    stage: str
    ms: float
    data: P
    origin: EventOrigin | None = None


def parse_event(obj: Mapping[str, Any] | str) -> Event[Any]:
    """The typed event of one event dict (or JSON text); EventError if it is not one."""
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except json.JSONDecodeError as e:
            raise EventError(f"an event is one JSON object: {e}") from None
    if not isinstance(obj, Mapping):
        raise EventError(f"an event is a JSON object, not {type(obj).__name__}")
    stage = obj.get("stage")
    cls = PAYLOADS.get(stage) if isinstance(stage, str) else None
    if cls is None:
        raise EventError(f"unknown event stage {stage!r} (known: {', '.join(PAYLOADS)})")
    errors = event_errors(dict(obj))
    if errors:
        raise EventError(f"the {stage} event does not follow the event schema: "
                         + "; ".join(errors))
    return Event(obj["seq"], str(stage), obj["ms"], from_dict(cls, obj["data"]),
                 obj.get("origin"))


def envelope(obj: Mapping[str, Any]) -> Event[Any]:
    """An event as a reader holds it (a server's job events, its store's rows, a stream it
    serves), with `data` left as it is: the stage, seq, ms and origin to read, without the
    schema check or converting every payload (parse_event does both, for events from
    elsewhere). `data_as` then reads the payload of a stage the reader needs. A field of the
wrong type reads as its default (seq -1, stage "", ms 0.0; data None where missing), never
raises."""
    seq, ms, stage = obj.get("seq"), obj.get("ms"), obj.get("stage")
    return Event(seq if isinstance(seq, int) else -1, stage if isinstance(stage, str) else "",
                 float(ms) if isinstance(ms, (int, float)) else 0.0, obj.get("data"),
                 obj.get("origin"))


def data_as(event: Event[Any], cls: type[T]) -> T | None:
    """An envelope's payload as `cls` where the event is of a stage whose payload is one
    (`done` as `JobDone` or `Done`, `error` as `Error`), converted by the declared types
    but not checked against the schema (the reader made or conformed the event itself);
    None for another stage, or data without a field `cls` requires."""
    return read_data(cls, event.data) if data_as_stage(event, cls) else None


def field_of(event: Event[Any], cls: type, name: str) -> Any:
    """One field of an envelope's payload, named as the model names it in `cls` (a name
    the model does not have raises at once, so a rename cannot pass silently), for a
    reader that needs one field of a payload that may be partial (a fake or a snippet's
    `run` says only `ok`); None where the event is of another stage or lacks the field."""
    if name not in {f.name for f in dataclasses.fields(cls)}:
        raise AttributeError(f"{cls.__name__} has no field {name!r}")
    if data_as_stage(event, cls) and isinstance(event.data, Mapping):
        return event.data.get(name)
    return None


def data_as_stage(event: Event[Any], cls: type) -> bool:
    """Whether the event is of a stage whose payload is a `cls` (or `cls` is one of it)."""
    stage = PAYLOADS.get(event.stage)
    return stage is not None and (issubclass(stage, cls) or issubclass(cls, stage))


def read_data(cls: type[T], data: Any) -> T | None:
    """`data` as the dataclass `cls` (as from_dict), or None where it is not one: not an
    object, or a required field missing."""
    try:
        return from_dict(cls, data)
    except (EventError, TypeError):
        return None


def parse_events(objs: typing.Iterable[Mapping[str, Any] | str]) -> list[Event[Any]]:
    return [parse_event(o) for o in objs]


def payload(event: Event[Any], cls: type[T]) -> T:
    """`event.data` as `cls`, for a reader that knows which stage it holds."""
    if not isinstance(event.data, cls):
        raise EventError(f"the {event.stage} event carries {type(event.data).__name__}, "
                         f"not {cls.__name__}")
    return event.data


def latest(events: typing.Iterable[Event[Any]], cls: type[T]) -> T | None:
    """The payload of the last event that carries a `cls` (None: no such event)."""
    found = None
    for event in events:
        if isinstance(event.data, cls):
            found = event.data
    return found


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """The dataclass `cls` of the model from its JSON object (fields converted by their
    declared types; a missing field takes its default, a missing required one fails)."""
    if not isinstance(data, Mapping):
        raise EventError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = _hints(typing.cast(type, cls))
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kwargs[f.name] = _value(hints[f.name], data[f.name])
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise EventError(f"{cls.__name__}: missing {f.name!r}")
    return cls(**kwargs)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _value(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, value)
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(tp)
        return [_value(item, v) for v in value]
    if origin is dict and isinstance(value, Mapping):
        _, item = typing.get_args(tp)
        return {k: _value(item, v) for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            if _fits(arg, value):
                return _value(arg, value)
    return value  # Any, a Literal, a number, a string, a boolean


def _fits(tp: Any, value: Any) -> bool:
    """Whether `value` is JSON of the shape `tp` stands for (to pick a union's member)."""
    origin = typing.get_origin(tp) or tp
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return isinstance(value, Mapping)
    shapes: dict[Any, Any] = {list: list, dict: Mapping, str: str, bool: bool,
                              int: int, float: (int, float), type(None): type(None)}
    shape = shapes.get(origin)
    return shape is None or isinstance(value, shape)
