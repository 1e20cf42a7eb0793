"""Guards and recompiles: what Dynamo checks before it reuses a compiled frame, and why it
compiled a frame again (part of the `capture` stage).

In: the snippet's calls of its compiled function (`snippet.Call`: arguments and grad mode as
the snippet made them) and the user's file. Out: `capture.data.compiles`, one entry per
Dynamo frame compile, in order (docs/events.md shows one).

Guard text comes from each cache entry's guard manager (what `TORCH_LOGS=guards` prints);
recompile reasons from Dynamo's `guard_fail_fn` hook (what `TORCH_LOGS=recompiles` prints).
Capture replays each of the snippet's calls (up to snippet.MAX_CALLS) through Dynamo with
the recording backend, so every recompile's graphs are captured too; `GuardLog.after_call`
reads what each call compiled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

MAX_RAW = 20_000  # characters of a guard tree kept verbatim
MAX_GUARDS = 200  # readable guard lines kept per compile

# Guard kinds that say nothing a user acts on; counted, not listed.
_NOISE = {"DIMENSION_DYNAMIC_MARKING_GUARD", "TORCH_FUNCTION_MODE_STACK", "LAMBDA_GUARD",
          "DEFAULT_DEVICE", "NO_HASATTR", "DICT_VERSION", "DICT_CONTAINS"}
_DTYPES = {"5": "float16", "6": "float32", "7": "float64", "15": "bfloat16"}  # ScalarType
_LEAF = re.compile(r"^[| ]*\+- ([A-Z_]+): (.*)$")
_WHERE = re.compile(r"#\s*(.*?)\s*#\s*([^#\s]+):(\d+) in (\w+).*$")


@dataclass
class GuardLog:
    """Collects Dynamo's guard failures (its guard_fail_fn) and, after each of the
    snippet's calls, the frame compiles that call caused."""

    path: str
    pending: list[str] = field(default_factory=list)
    compiles: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)  # each call: what ran it
    seen: set[str] = field(default_factory=set)

    def fail(self, failure: Any) -> None:
        reason = getattr(failure, "reason", str(failure))
        self.pending.append(str(reason).strip())

    def after_call(self, index: int, call: Any, ran: list[str] | None = None) -> None:
        """Every cache entry new since the last call is a compile this call caused; a
        recompile's reasons are the guard failures of the same frame's older entries."""
        entries = cache_entries(self.path)
        new = sorted(set(entries) - self.seen, key=_id_key)
        self.calls.append(_call_record(index, call, new, self.pending, ran or []))
        for cid in new:
            frame, _, count = cid.partition("/")
            mine = [r for r in self.pending if r.split("/", 1)[0] == frame]
            self.pending = [r for r in self.pending if r not in mine]
            self.compiles.append({
                "compile_id": cid, "call": index, "recompile": count not in ("", "0"),
                "reasons": list(dict.fromkeys(_strip_id(r) for r in mine)),
                "inputs": [input_spec(a) for a in call.args], "grad_mode": call.grad_mode,
                **entries[cid]})
        self.seen |= set(entries)
        self.pending = []

    def failed(self, index: int, e: BaseException) -> None:
        self.calls.append({"call": index, "compile_ids": [], "compiled": False})
        self.compiles.append({"compile_id": None, "call": index, "recompile": False,
                              "reasons": [], "error": f"{type(e).__name__}: {e}"[:500]})


def _call_record(index: int, call: Any, new: list[str], reasons: list[str],
                 ran: list[str]) -> dict[str, Any]:
    """What ran one call: the compiles it caused, or, when it caused none, the compiles
    whose graphs ran for it (`ran`: the recording backend saw them run)."""
    failed = list(dict.fromkeys(m.group(0)[:-1] for r in reasons
                                if (m := re.match(r"\d+/\d+:", r.strip()))))
    record = {"call": index, "inputs": [input_spec(a) for a in call.args],
              "grad_mode": call.grad_mode, "failed": failed, "compiled": bool(new)}
    return {**record, "compile_ids": new or list(dict.fromkeys(ran))}


def _strip_id(reason: str) -> str:
    # "0/1: tensor 'x' ..." names the cache entry that failed; keep the reason itself.
    return re.sub(r"^\d+/\d+: ", "", reason.strip())


def _id_key(cid: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", cid))


def cache_entries(path: str) -> dict[str, dict[str, Any]]:
    """compile id -> function, line and guards of every frame Dynamo has compiled."""
    from torch._dynamo.convert_frame import input_codes
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    out: dict[str, dict[str, Any]] = {}
    for ref in list(input_codes.seen):
        code = ref() if callable(ref) else ref
        if code is None:
            continue
        for entry in _debug_get_cache_entry_list(code):
            raw = str(entry.guard_manager)
            out[str(entry.compile_id)] = {
                "function": code.co_name,
                "line": code.co_firstlineno if code.co_filename == path else None,
                "guards": readable_guards(raw, path),
                "hidden_guards": sum(1 for ln in raw.splitlines()
                                     if (m := _LEAF.match(ln)) and m.group(1) in _NOISE),
                "raw": raw.strip()[:MAX_RAW],
            }
    return out


def readable_guards(raw: str, path: str) -> list[dict[str, Any]]:
    """The guard tree's checks, one line each, in words where the kind is a common one."""
    out: list[dict[str, Any]] = []
    name = Path(path).name
    for text in raw.splitlines():
        m = _LEAF.match(text)
        if m is None:
            continue
        kind, body = m.groups()
        if kind == "LAMBDA_GUARD" and "size()" in body:
            kind = "SHAPE"  # a symbolic shape's range: the guard of a dynamic dimension
        elif kind in _NOISE:
            continue
        line = None
        where = _WHERE.search(body)
        if where is not None:
            if Path(where.group(2)).name == name:
                line = int(where.group(3))
            body = body[: where.start()].rstrip()
        body = body.split("  #")[0].rstrip()  # Dynamo's own notes after the check
        out.append({"kind": kind, "text": _describe(kind, body), "line": line})
        if len(out) >= MAX_GUARDS:
            break
    return out


def _source(expr: str) -> str:
    # L['x'] -> x ; L['self']._modules['l'] -> self._modules['l']; G['name'] -> name
    expr = re.sub(r"\bL\['([^']+)'\]", r"\1", expr)
    return re.sub(r"\bG\['([^']+)'\]", r"\1", expr)


def _describe(kind: str, body: str) -> str:
    if kind == "TENSOR_MATCH":
        m = re.match(r"check_tensor\((.*?), (\w+), DispatchKeySet\((.*?)\), torch\.(\w+), "
                     r"device=(\w+), requires_grad=(\w+), size=(\[.*?\]), stride=(\[.*?\])\)",
                     body)
        if m:
            src, cls, _keys, dtype, device, grad, size, stride = m.groups()
            dev = "" if device == "None" else f" on cuda:{device}"
            size, stride = size.replace("None", "?"), stride.replace("None", "?")
            if "?" in size:
                size += " (dynamic: any size where ?)"
            return (f"{_source(src)}: {cls} {dtype}{size}, stride {stride}{dev}, "
                    f"requires_grad={grad}")
    if kind == "GLOBAL_STATE":
        m = re.search(r'"grad_mode":(\w+)', body)
        dtype = re.search(r'"default_dtype":(\d+)', body)
        parts = [f"grad_mode={m.group(1) == 'true'}" if m else None,
                 "autocast off" if '"enabled":[false' in body else "autocast state",
                 f"default dtype {_DTYPES.get(dtype.group(1), dtype.group(1))}" if dtype
                 else None]
        return "global state unchanged: " + ", ".join(p for p in parts if p)
    if kind == "ID_MATCH":
        m = re.match(r"___check_obj_id\((.*?), \d+\)", body)
        if m:
            return f"{_source(m.group(1))} is the same object"
    if kind == "TYPE_MATCH":
        m = re.match(r"___check_type_id\((.*?), \d+\), type=<class '(.*?)'>", body)
        if m:
            return f"{_source(m.group(1))} has type {m.group(2).rsplit('.', 1)[-1]}"
    if kind in ("EQUALS_MATCH", "CONSTANT_MATCH"):
        return _source(body)
    return _source(body)[:300]


def input_spec(a: Any) -> dict[str, Any]:
    if isinstance(a, torch.Tensor):
        return {"shape": list(a.shape), "dtype": str(a.dtype).removeprefix("torch."),
                "device": a.device.type, "requires_grad": a.requires_grad}
    return {"value": repr(a)[:80]}

