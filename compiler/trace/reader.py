"""Your own run, opened: a trace directory's files (compiler/trace/writer.py) as one trace.

In: the files a recorded run wrote, as (name, bytes) pairs: one JSON record per compiled
ATen graph (`format: kernelscope-trace`), and `run.json` (`format: kernelscope-run`) when
`kernelscope run` recorded it. Out: `Opened(code, options, events, notices)`: the events
a job's trace carries (`source`, `capture`, `lowering` .. `compile`, `done`), every graph
numbered in the order it was compiled, for a trace store (`kernelscope open`, the upload
endpoint in server/web/uploads.py).

The files are someone else's data (an upload is hostile): each file is strict JSON of
bounded size and depth; a format or schema version this code does not know is refused,
never guessed at; every assembled event is checked against the event schema
(compiler/events/check.py), and a refusal says which file and field. Torch-free: the server
imports this module.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.devices import CPU
from kernelscope.compiler.events.check import event_errors
from kernelscope.compiler.events.stage import SCHEMA_VERSION
from kernelscope.compiler.versions import __version__

FORMAT = "kernelscope-trace"  # one compiled graph's file
RUN_FORMAT = "kernelscope-run"  # run.json: the command `kernelscope run` ran, its compile calls
VERSION = 1  # the version of both file formats this code reads and writes
RUN_FILE = "run.json"
GRAPH_STAGES = ("capture", "lowering", "scheduling", "memory", "codegen", "compile")
MAX_FILES = 1000
MAX_FILE_BYTES = 32 << 20
MAX_TOTAL_BYTES = 64 << 20
MAX_DEPTH = 64  # as deep as a worker's event may be (server/jobs/inputs.py)
MAX_CODE = 1 << 20
MAX_NOTICES = 50  # notices an opened trace keeps (one more says how many were left out)
NOTICE_CHARS = 400  # characters of one notice
VERSION_KEYS = ("python", "torch", "triton", "kernelscope")
# Options that name folders of the recording machine: not part of what the trace shows.
LOCAL_OPTIONS = ("trace_dir", "cache_dir")


class TraceRefused(ValueError):
    """Files that cannot be opened as a trace; the message says which file and why."""


@dataclass
class Opened:
    code: str
    options: dict[str, Any]
    events: list[dict[str, Any]]
    notices: list[str] = field(default_factory=list)


def read_dir(directory: str | os.PathLike[str]) -> list[tuple[str, bytes]]:
    """The JSON files of a trace directory, by name, within the caps."""
    root = Path(directory)
    if not root.is_dir():
        raise TraceRefused(f"{directory}: not a directory")
    paths = sorted(p for p in root.glob("*.json") if p.is_file())
    if not paths:
        raise TraceRefused(f"{directory}: no trace files (*.json); record a run with "
                           "`kernelscope run script.py` or options={\"trace_dir\": ...}")
    if len(paths) > MAX_FILES:
        raise TraceRefused(f"{directory}: {len(paths)} files, more than {MAX_FILES}")
    files, total = [], 0
    for p in paths:
        size = p.stat().st_size
        total += size
        if size > MAX_FILE_BYTES or total > MAX_TOTAL_BYTES:
            raise TraceRefused(f"{p.name}: the files are too large (limit "
                               f"{MAX_FILE_BYTES >> 20} MiB a file, {MAX_TOTAL_BYTES >> 20} "
                               "MiB together)")
        files.append((p.name, p.read_bytes()))
    return files


def open_files(files: list[tuple[str, bytes]]) -> Opened:
    """Parse, check and assemble; TraceRefused on anything outside the formats."""
    if not files:
        raise TraceRefused("no trace files")
    if len(files) > MAX_FILES:
        raise TraceRefused(f"{len(files)} files, more than {MAX_FILES}")
    records: list[tuple[str, dict[str, Any]]] = []
    run: dict[str, Any] | None = None
    for name, raw in files:
        value = parse_file(name, raw)
        if value["format"] == RUN_FORMAT:
            run = value
        else:
            records.append((name, value))
    if not records:
        raise TraceRefused("no compiled graph among the files (only run.json): the script "
                           "compiled nothing with backend=\"kernelscope\"")
    return assemble(records, run)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_file(name: str, raw: bytes) -> dict[str, Any]:
    """One file as a record of a known format and version."""
    if len(raw) > MAX_FILE_BYTES:
        raise TraceRefused(f"{name}: larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        value = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise TraceRefused(f"{name}: nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise TraceRefused(f"{name}: not JSON ({str(e)[:120]})") from None
    _check_depth(name, value)
    if not isinstance(value, dict) or value.get("format") not in (FORMAT, RUN_FORMAT):
        raise TraceRefused(f"{name}: not a Kernelscope trace file (no \"format\": "
                           f"\"{FORMAT}\")")
    version, schema = value.get("version"), value.get("schema", SCHEMA_VERSION)
    written_by = _text(_dict(value.get("versions")).get("kernelscope")) or "unknown"
    if version != VERSION or schema != SCHEMA_VERSION:
        what = f"format version {version!r}" if version != VERSION else \
            f"event schema {schema!r}"
        raise TraceRefused(
            f"{name}: trace {what} is unknown to this Kernelscope ({__version__}, which reads "
            f"format version {VERSION}, event schema {SCHEMA_VERSION}); it was written by "
            f"kernelscope {written_by}: open it with that version")
    return value


def _check_depth(name: str, value: Any) -> None:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise TraceRefused(f"{name}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any, cap: int = 500) -> str | None:
    return value[:cap] if isinstance(value, str) else None


def _line(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _site(value: Any) -> dict[str, Any] | None:
    site = _dict(value)
    if not site:
        return None
    return {"file": _text(site.get("file")), "line": _line(site.get("line")),
            "function": _text(site.get("function"), 200), "code": _text(site.get("code"), 300)}


def assemble(records: list[tuple[str, dict[str, Any]]], run: dict[str, Any] | None) -> Opened:
    """One trace from the graph records (in the order they were written) and run.json."""
    records = sorted(records, key=_written_order)
    files = Counter(r["filename"] for _, r in records if isinstance(r.get("filename"), str))
    main = files.most_common(1)[0][0] if files else None
    code = next((r["code"] for _, r in records
                 if r.get("filename") == main and isinstance(r.get("code"), str)), "")[:MAX_CODE]
    first = records[0][1]
    notices: list[str] = []
    graphs: dict[str, list[Any]] = {stage: [] for stage in GRAPH_STAGES}
    compiles: dict[str, dict[str, Any]] = {}
    breaks: list[dict[str, Any]] = []
    dynamo: list[dict[str, Any]] = []  # each Dynamo compile with its sites, for the UI
    for gid, (name, record) in enumerate(records):
        stages = _dict(record.get("stages"))
        for stage in GRAPH_STAGES:
            graph = stages.get(stage)
            if not isinstance(graph, dict):
                raise TraceRefused(f"{name}: no {stage} stage (a recorded graph has "
                                   f"{', '.join(GRAPH_STAGES)})")
            graph = {**graph, "id": gid}
            extra = {"graph_breaks": [], "dynamo_graphs": 1} if stage == "capture" else {}
            _refuse_bad(name, stage, {"graphs": [graph], **extra})
            graphs[stage].append(graph)
        cid = _text(record.get("compile_id"), 40) or f"graph {gid}"
        same_file = record.get("filename") == main
        if record.get("filename") is not None and not same_file:
            notices.append(f"graph {gid} ({cid}) points into {_text(record['filename'], 200)},"
                           f" not the file shown ({_text(main, 200)}): its source lines refer "
                           "to that file")
        site = _site(record.get("call_site")) or {}
        if cid not in compiles:
            compiles[cid], graph_break, entry = _new_compile(cid, len(compiles), record, site,
                                                             main)
            breaks += [graph_break] if graph_break else []
            dynamo.append(entry)
        graphs["capture"][-1].update(compile_id=cid, dynamo_graph=list(compiles).index(cid),
                                     split=_split(record.get("split")))
    notices += _version_notices(records)
    if any(_config(r) != _config(first) for _, r in records):
        notices.append("the torch config changed during the run: the first compile's is shown")
    options = _options(_dict(first.get("options")))
    source = _source(first, options, main, code)
    capture: dict[str, Any] = {"graphs": graphs["capture"], "graph_breaks": breaks,
                               "dynamo_graphs": len(compiles),
                               "compiles": list(compiles.values()), "origin": "snippet"}
    payloads: list[tuple[str, dict[str, Any]]] = [
        ("source", source), ("capture", capture),
        *((s, {"graphs": graphs[s]}) for s in GRAPH_STAGES[1:]),
        ("done", {"ok": True, "isolated": False})]
    events = _events(payloads, _stage_ms(records))
    notices = capped_notices(notices + _run_notices(run))
    recorded = {"graphs": len(records), "compiles": len(compiles),
                "recompiles": sum(c["recompile"] for c in compiles.values()),
                "graph_breaks": len(breaks), "versions": _versions(first),
                "file": _text(main, 500), "config": _config(first), "dynamo": dynamo[:500],
                "notices": notices,
                **_run_summary(run)}
    return Opened(code, {**options, "recorded": recorded}, events, notices)


def _split(value: Any) -> dict[str, Any] | None:
    """A DDP bucket's split as recorded (writer.py), its fields checked."""
    split = _dict(value)
    ints = ("index", "count", "bucket_bytes", "bucket_cap")
    if not split or not all(isinstance(split.get(k), int) for k in ints):
        return None
    params = [_text(p, 300) for p in split.get("params") or [] if isinstance(p, str)]
    return {"by": _text(split.get("by"), 40) or "", **{k: split[k] for k in ints},
            "params": params[:64], "reason": _text(split.get("reason"), 500) or ""}


def capped_notices(notices: list[str]) -> list[str]:
    """At most MAX_NOTICES notices of at most NOTICE_CHARS each: a file's name or a call
    site is someone else's text, quoted in a notice per graph."""
    kept = [n if len(n) <= NOTICE_CHARS else n[:NOTICE_CHARS - 1] + "…"
            for n in notices[:MAX_NOTICES]]
    if len(notices) > MAX_NOTICES:
        kept.append(f"... and {len(notices) - MAX_NOTICES} more notices")
    return kept


def _written_order(item: tuple[str, dict[str, Any]]) -> tuple[int, str]:
    seq = item[1].get("seq")
    return (seq if isinstance(seq, int) and not isinstance(seq, bool) else 0, item[0])


def _new_compile(cid: str, call_index: int, record: dict[str, Any], site: dict[str, Any],
                 main: str | None
                 ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """A Dynamo compile met in its first graph record: its row of capture's `compiles`,
    the graph break that ended it (None if none) and its entry for the UI's list."""
    row = {"compile_id": cid, "call": call_index, "recompile": record.get("recompile") is True,
           "reasons": [r[:2000] for r in record.get("reasons") or [] if isinstance(r, str)],
           "function": site.get("function") or "",
           "line": site.get("line") if site.get("file") == main else None,
           "inputs": [], "guards": [], "hidden_guards": 0, "raw": "", "error": ""}
    reason = _text(record.get("graph_break"))
    where = _site(record.get("graph_break_site"))
    graph_break = {"reason": reason, "line": (where or {}).get("line")
                   if (where or {}).get("file") == main else None} if reason else None
    call = _dict(record.get("compile_call"))
    entry = {"compile_id": cid, "recompile": row["recompile"], "call_site": site or None,
             "graph_break": reason, "graph_break_site": where,
             "torch_compile": _line(call.get("call"))}
    return row, graph_break, entry


def _events(payloads: list[tuple[str, dict[str, Any]]], ms: dict[str, float]
            ) -> list[dict[str, Any]]:
    """Every event is the recording process's word: as for a job run in one process. A
    stage's ms is its time summed over the graphs (capture's, Dynamo's, is not recorded)."""
    events: list[dict[str, Any]] = [
        {"schema": SCHEMA_VERSION, "seq": i, "stage": stage, "ms": ms.get(stage, 0.0),
         "data": data, "origin": "snippet"} for i, (stage, data) in enumerate(payloads)]
    for event in events[:2]:
        _refuse_bad("the assembled trace", event["stage"], event["data"])
    return events


def _stage_ms(records: list[tuple[str, dict[str, Any]]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for _, record in records:
        for stage, value in _dict(record.get("ms")).items():
            if stage in GRAPH_STAGES and isinstance(value, (int, float)) \
                    and not isinstance(value, bool) and 0 <= value < 1e9:
                total[stage] = round(total.get(stage, 0.0) + float(value), 3)
    return total


def _source(first: dict[str, Any], options: dict[str, Any], main: str | None,
            code: str) -> dict[str, Any]:
    """The `source` payload: the file the graphs point into, the first compile's options
    and the versions that recorded it."""
    device = _text(options.get("device"), 20) or CPU
    try:
        target = targets.resolve(str(options.get("backend", targets.AUTO)), device)
        backend, label, emulated = target.name, target.label, target.emulated_on(device)
    except ValueError:
        backend, label, emulated = str(options.get("backend"))[:40], "", False
    site = _site(first.get("call_site")) or {}
    return {"code": code, "filename": _text(main, 500) or "", "entry": site.get("function") or "",
            "entry_line": None, "inputs": [], "device": device, "backend": backend,
            "backend_label": label, "triton_interpret": emulated, "emulated": emulated,
            "options": options, "versions": _versions(first), "stdout": "",
            "origin": "snippet"}


def _refuse_bad(name: str, stage: str, data: dict[str, Any]) -> None:
    errors = event_errors({"schema": SCHEMA_VERSION, "seq": 0, "stage": stage, "ms": 0.0,
                           "data": data})
    if errors:
        raise TraceRefused(f"{name}: the {stage} stage does not follow the event schema "
                           f"{SCHEMA_VERSION}: {'; '.join(errors)}")


def _versions(record: dict[str, Any]) -> dict[str, Any]:
    v = _dict(record.get("versions"))
    return {"python": _text(v.get("python"), 40) or "", "torch": _text(v.get("torch"), 40) or "",
            "triton": _text(v.get("triton"), 40), "gpu": _text(v.get("gpu"), 100),
            "kernelscope": _text(v.get("kernelscope"), 40) or ""}


def _version_notices(records: list[tuple[str, dict[str, Any]]]) -> list[str]:
    seen = {tuple(_versions(r).get(k) for k in VERSION_KEYS) for _, r in records}
    if len(seen) < 2:
        return []
    return ["the files were written by different versions: " + "; ".join(
        ", ".join(f"{k} {v}" for k, v in zip(VERSION_KEYS, s)) for s in sorted(seen, key=str))]


def _config(record: dict[str, Any]) -> dict[str, str]:
    """The torch settings off their defaults when the graph compiled (name -> repr)."""
    return {k[:100]: v[:200] for k, v in list(_dict(record.get("config")).items())[:100]
            if isinstance(k, str) and isinstance(v, str)}


def _options(raw: dict[str, Any]) -> dict[str, Any]:
    """The compile options as recorded, scalars only (a nested value is someone's data)."""
    out: dict[str, Any] = {}
    for key, value in list(raw.items())[:64]:
        if isinstance(key, str) and len(key) <= 64 and key not in LOCAL_OPTIONS and (
                value is None or isinstance(value, (bool, int, float))
                or isinstance(value, str) and len(value) <= 200):
            out[key] = value
    return out


def _calls(run: dict[str, Any] | None) -> list[dict[str, Any]]:
    out = []
    for call in (run or {}).get("calls") or []:
        call = _dict(call)
        out.append({"call": _line(call.get("call")), "site": _site(call.get("site")),
                    "backend": _text(call.get("backend"), 100),
                    "recorded": call.get("recorded") is True,
                    "routed": call.get("routed") is True,
                    "mode": _text(call.get("mode"), 100), "fullgraph": call.get("fullgraph"),
                    "dynamic": call.get("dynamic"),
                    "dropped": [d[:100] for d in call.get("dropped") or [] if isinstance(d, str)]})
    return out[:200]


def _run_summary(run: dict[str, Any] | None) -> dict[str, Any]:
    if run is None:
        return {}
    argv = [a[:500] for a in run.get("argv") or [] if isinstance(a, str)][:100]
    ranks = [{"rank": r["rank"], "url": r["url"][:200]} for r in run.get("ranks") or []
             if isinstance(r, dict) and _line(r.get("rank")) is not None
             and isinstance(r.get("url"), str) and r["url"].startswith("/t/")][:1024]
    out = {"argv": argv, "exit": _line(run.get("exit")), "calls": _calls(run)}
    if _line(run.get("rank")) is not None:
        out.update(rank=run["rank"], world_size=_line(run.get("world_size")), ranks=ranks)
    return out


def _run_notices(run: dict[str, Any] | None) -> list[str]:
    notices = []
    for call in _calls(run):
        site = call["site"] or {}
        where = f"{site.get('file')}:{site.get('line')}"
        if not call["recorded"]:
            notices.append(f"torch.compile at {where} uses backend {call['backend']!r}: "
                           "not recorded (kernelscope run --all-backends routes it here)")
        elif call["routed"]:
            dropped = f", without {', '.join(call['dropped'])}" if call["dropped"] else ""
            notices.append(f"torch.compile at {where} asked for backend {call['backend']!r} "
                           f"and was compiled by Kernelscope instead{dropped}")
    return notices

