"""A TORCH_TRACE log of a stock torch.compile run, read one record at a time.

In: the lines of the structured log torch writes with `TORCH_TRACE=DIR` (what tlparse
reads): each record a glog-style prefix and one JSON object on a line, its payload (if it
has one) on the lines after it, each starting with a tab. Out: `LoggedRun`, per Dynamo
compile id ("0/1"; a compiled-autograd one "!0/0/1"): the frame it compiled (its user file,
line and function), the Dynamo graph, the guards, every recompile reason, the graph breaks
with their user lines, the AOT graphs (inference, or forward and backward), the post-grad
graphs, Inductor's output code with its node mappings, the compile-time metrics and the
cache hits and misses. A record this reader does not know is kept as unknown with its
payload (cut at `MAX_UNKNOWN`), never dropped; timing events (`chromium_event`) and tensor
descriptions are counted.

The log is someone else's data: it is read line by line (a 200 MB log never sits in memory
whole: only the payloads kept, each capped), a line that is not a record is counted and
skipped, and nothing in it is executed. Torch-free: the server's upload child imports it.
compiler/trace/torch_trace_events.py turns a LoggedRun into a trace's events.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

MAX_PAYLOAD = 4 << 20  # characters kept of one graph's or one module's text
MAX_UNKNOWN = 64 << 10  # characters kept of an unknown record's payload
_RECORD = re.compile(r"^[VIWEDC]\d{4} [\d:.]+\s+\d+ [^\]]*\] (\{.*\})\s*$")
_IDS = ("frame_id", "frame_compile_id", "attempt", "has_payload", "compiled_autograd_id")
AOT_GRAPHS = {"aot_inference_graph": "inference", "aot_forward_graph": "forward",
              "aot_backward_graph": "backward", "aot_joint_graph": "joint"}
# Records read for what they say; the rest of these are known and counted.
COUNTED = ("chromium_event", "describe_storage", "describe_tensor", "describe_source",
           "create_symbol", "create_unbacked_symbol", "guard_added", "guard_added_fast",
           "propagate_real_tensors", "symbolic_shape_specialization", "expression_created",
           "missing_fake_kernel", "dump_file", "link", "optimize_ddp_split_graph",
           "optimize_ddp_split_child", "graph_break")
KNOWN_ARTIFACTS = (
    "torch_version", "recompile_reasons", "dynamo_graph_break_reason",
    "inductor_provenance_tracking_node_mappings",
    "inductor_provenance_tracking_kernel_stack_traces",
    "inductor_post_grad_graph", "before_post_grad_graph", "before_pre_grad_graph",
    "after_pre_grad_graph", "before_joint_graph", "after_joint_graph", "fx_graph_runnable",
    "fx_graph_cache_miss", "fx_graph_cache_hit", "fx_graph_cache_bypass",
    "aotautograd_cache_miss", "aotautograd_cache_hit", "aotautograd_cache_bypass",
    "aot_forward_graph_fw_metadata", "torch._functorch.config", "runtime_wrapper_orchestration",
    "backward_prologue", "backward_epilogue", "compiled_function_forward",
    "compiled_function_backward", "compiled_fn_wrapper", "triton_kernel_info")


@dataclass
class Artifact:
    """A record kept as it was: an unknown one (its payload cut at MAX_UNKNOWN), or a known
    one this reader only lists (its size)."""

    name: str
    known: bool
    chars: int
    payload: str = ""


@dataclass
class LoggedCompile:
    compile_id: str
    frame: dict[str, Any] = field(default_factory=dict)  # file, line, function
    dynamo_graph: str = ""
    guards: str = ""
    reasons: list[str] = field(default_factory=list)
    breaks: list[dict[str, Any]] = field(default_factory=list)  # reason, file, line
    aot: dict[str, str] = field(default_factory=dict)  # kind -> graph text
    post_grad: list[str] = field(default_factory=list)
    output_code: list[str] = field(default_factory=list)
    mappings: list[dict[str, Any]] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    bwd_metrics: dict[str, Any] = field(default_factory=dict)
    cache: list[str] = field(default_factory=list)  # "fx_graph_cache_hit", ...
    artifacts: list[Artifact] = field(default_factory=list)


@dataclass
class LoggedRun:
    compiles: dict[str, LoggedCompile] = field(default_factory=dict)
    files: dict[int, str] = field(default_factory=dict)  # the log's interned file names
    torch_version: str = ""
    counted: Counter[str] = field(default_factory=Counter)
    unknown: list[Artifact] = field(default_factory=list)  # records of no compile
    skipped_lines: int = 0
    records: int = 0


def records(lines: Iterable[str]) -> Iterator[tuple[dict[str, Any], str | None]]:
    """(the record's JSON object, its payload or None), one at a time."""
    head: dict[str, Any] | None = None
    payload: list[str] = []
    size = 0
    for line in lines:
        if line.startswith("\t"):
            if head is not None and size < MAX_PAYLOAD:
                payload.append(line[1:].rstrip("\n"))
                size += len(line)
            continue
        if head is not None:
            yield head, "\n".join(payload) if "has_payload" in head else None
        head, payload, size = None, [], 0
        m = _RECORD.match(line.rstrip("\n"))
        if m is None:
            if line.strip():
                yield {"?": line[:200]}, None
            continue
        try:
            value = json.loads(m.group(1))
        except ValueError:
            yield {"?": line[:200]}, None
            continue
        head = value if isinstance(value, dict) else {"?": line[:200]}
    if head is not None:
        yield head, "\n".join(payload) if "has_payload" in head else None


def compile_id(head: dict[str, Any]) -> str | None:
    frame, n = head.get("frame_id"), head.get("frame_compile_id")
    if not isinstance(frame, int) or not isinstance(n, int):
        return None
    autograd = head.get("compiled_autograd_id")
    return f"!{autograd}/{frame}/{n}" if isinstance(autograd, int) else f"{frame}/{n}"


def read_log(lines: Iterable[str]) -> LoggedRun:
    run = LoggedRun()
    for head, payload in records(lines):
        if "?" in head:
            run.skipped_lines += 1
            continue
        run.records += 1
        kind = next((k for k in head if k not in _IDS), "")
        cid = compile_id(head)
        one = None
        if cid is not None:
            one = run.compiles.setdefault(cid, LoggedCompile(cid))
        _take(run, one, kind, head.get(kind), payload or "")
    return run


def _take(run: LoggedRun, one: LoggedCompile | None, kind: str, meta: Any,
          payload: str) -> None:
    if kind == "str" and isinstance(meta, list) and len(meta) == 2:
        run.files[int(meta[1])] = str(meta[0])
    elif kind == "artifact":
        _artifact(run, one, meta if isinstance(meta, dict) else {}, payload)
    elif kind in COUNTED:
        run.counted[kind] += 1
    elif one is None:
        run.unknown.append(Artifact(kind, False, len(payload), payload[:MAX_UNKNOWN]))
    elif not _compile_record(run, one, kind, meta, payload):
        one.artifacts.append(Artifact(kind, False, len(payload), payload[:MAX_UNKNOWN]))


def _compile_record(run: LoggedRun, one: LoggedCompile, kind: str, meta: Any,
                    payload: str) -> bool:
    """Reads a record of a compile; False: a kind this reader does not know."""
    if kind == "dynamo_start":
        stack = (meta or {}).get("stack") or []
        if stack and isinstance(stack[-1], dict):
            top = stack[-1]
            file = top.get("filename")
            one.frame = {"file": run.files.get(file, str(file)) if isinstance(file, int)
                         else str(file),
                         "line": top.get("line"), "function": str(top.get("name", ""))}
    elif kind == "dynamo_output_graph":
        one.dynamo_graph = payload
    elif kind == "dynamo_cpp_guards_str":
        one.guards = payload
    elif kind in AOT_GRAPHS:
        one.aot[AOT_GRAPHS[kind]] = payload
    elif kind == "inductor_post_grad_graph":  # a record of its own where a cache filled it
        one.post_grad.append(payload)
    elif kind == "inductor_output_code":
        one.output_code.append(payload)
    elif kind == "compilation_metrics":
        one.metrics = meta if isinstance(meta, dict) else {}
    elif kind == "bwd_compilation_metrics":
        one.bwd_metrics = meta if isinstance(meta, dict) else {}
    else:
        return False
    return True


def _artifact(run: LoggedRun, one: LoggedCompile | None, meta: dict[str, Any],
              payload: str) -> None:
    name = str(meta.get("name", ""))
    if name == "torch_version":
        run.torch_version = str(_json(payload).get("pytorch_version", ""))
        return
    if one is None:
        run.unknown.append(Artifact(name, name in KNOWN_ARTIFACTS, len(payload),
                                    "" if name in KNOWN_ARTIFACTS else payload[:MAX_UNKNOWN]))
        return
    if name == "recompile_reasons":
        one.reasons += _reasons(payload)
    elif name == "dynamo_graph_break_reason":
        one.breaks.append(_graph_break(payload))
    elif name == "inductor_provenance_tracking_node_mappings":
        one.mappings.append(_json(payload))
    elif name == "inductor_post_grad_graph":
        one.post_grad.append(payload[:MAX_PAYLOAD])
    elif "_cache_" in name:
        one.cache.append(name)
    else:
        known = name in KNOWN_ARTIFACTS or name.startswith("torch_dynamo_resume_in_")
        one.artifacts.append(Artifact(name, known, len(payload),
                                      "" if known else payload[:MAX_UNKNOWN]))


def _json(payload: str) -> dict[str, Any]:
    try:
        value = json.loads(payload) if payload else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _reasons(payload: str) -> list[str]:
    """Every reason (torch writes a JSON list, or the lines of text)."""
    try:
        value = json.loads(payload)
    except ValueError:
        value = payload.splitlines()
    items = value if isinstance(value, list) else [value]
    return [str(r).strip()[:2000] for r in items if str(r).strip()]


_BREAK_AT = re.compile(r"Graph break in user code at (.+):(\d+)")
_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _graph_break(payload: str) -> dict[str, Any]:
    """The reason and the user's line: the innermost frame of the user code traceback."""
    m = _BREAK_AT.search(payload)
    file, line = (m.group(1), int(m.group(2))) if m else (None, None)
    said = [ln.strip() for ln in payload.splitlines()]
    reason = next((ln.removeprefix("Explanation:").strip() for ln in said
                   if ln.startswith("Explanation:")), "") or next(
        (ln.removeprefix("Graph Break Reason:").strip() for ln in said
         if ln.startswith("Graph Break Reason:")), "")
    user = payload.split("User code traceback:", 1)[1] if "User code traceback:" in payload \
        else ""
    frames = _USER_FRAME.findall(user.split("Traceback (most recent call last)")[0])
    if frames:
        file, line = frames[-1][0], int(frames[-1][1])
    return {"reason": (reason or payload.splitlines()[0] if payload else "")[:1000],
            "file": file, "line": line, "text": payload[:8000]}
