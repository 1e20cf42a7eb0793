"""Your own run: the backend's trace directory (`options={"trace_dir": DIR}`).

In a user's own script, `torch.compile(model, backend="kernelscope", options={"trace_dir":
DIR})` (or `kernelscope run script.py`) compiles as always and also writes, for every ATen
graph it compiles, one JSON file into DIR: the same stage payloads a job's trace carries
(capture's graph, lowering, scheduling, memory, codegen, compile), with the Dynamo compile
that made it (its id, whether it recompiled and why, the graph break that ended it), the
call site in the user's code, the file the graph's lines point into, the options and the
versions of everything. `kernelscope open DIR` (compiler/trace/reader.py) puts the files
together into one trace, as the explorer shows a job's.

Recompile reasons and graph breaks come from Dynamo's structured log (what `TORCH_TRACE`
and tlparse read): while a trace directory is written, a handler on that log keeps the
`recompile_reasons` and graph-break artifacts; nothing else of the log is kept.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import re
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelscope.compiler.capture.ddp_split import ddp_bucket
from kernelscope.compiler.devices import CPU
from kernelscope.compiler.events import types as ev
from kernelscope.compiler.events.stage import SCHEMA_VERSION
from kernelscope.compiler.kernel_numbers import KernelNumbers, numbered_in
from kernelscope.compiler.runtime.cache import write_atomic
from kernelscope.compiler.trace.ranks import rank_dir
from kernelscope.compiler.trace.reader import FORMAT, VERSION
from kernelscope.compiler.versions import versions

MAX_CODE = 1 << 20  # characters of the user's file kept in a trace file
# Our own frames, by both spellings (the path resolved, and as imported).
_HERE = (str(Path(__file__).resolve().parents[1]),
         str(Path(__file__).absolute().parents[1]))
_TORCH = str(Path(torch.__file__).resolve().parent)
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


class _StructuredLog(logging.Handler):
    """Keeps Dynamo's recompile reasons and graph-break reasons, by frame compile id."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reasons: dict[str, list[str]] = {}
        self.breaks: list[str] = []
        # `self.lock` is logging.Handler's own (reentrant) lock, held around emit()

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        if not isinstance(meta, dict):
            return
        artifact = meta.get("artifact")
        if not isinstance(artifact, dict):
            return
        name = artifact.get("name")
        if name == "recompile_reasons":
            payload = getattr(record, "payload", None)
            try:
                value = json.loads(payload) if isinstance(payload, str) else payload
            except ValueError:
                value = payload
            reasons = value if isinstance(value, list) else [value]
            cid = f"{meta.get('frame_id')}/{meta.get('frame_compile_id')}"
            self.reasons[cid] = [str(r).strip()[:2000] for r in reasons if r][:20]
        elif name == "dynamo_graph_break_reason":
            self.breaks.append(str(getattr(record, "payload", "")).strip()[:500])


_LOG: _StructuredLog | None = None
_LOG_LOCK = threading.Lock()


def _structured_log() -> _StructuredLog:
    """The one handler on Dynamo's structured log for this process (installed on the first
    trace directory: a process-wide log needs a process-wide listener)."""
    global _LOG
    with _LOG_LOCK:
        if _LOG is None:
            from torch._logging._internal import trace_log

            _LOG = _StructuredLog()
            trace_log.addHandler(_LOG)
        return _LOG


def call_site() -> dict[str, Any] | None:
    """The innermost frame of the user's code on the stack: the call that made Dynamo
    compile (torch's frames, ours and the standard library's skipped)."""
    for frame in reversed(traceback.extract_stack()):
        path = frame.filename
        if path.startswith((*_HERE, _TORCH, "<")) or "/lib/python3" in path \
                and "site-packages" not in path:
            continue
        return {"file": path, "line": frame.lineno, "function": frame.name,
                "code": (frame.line or "").strip()[:300]}
    return None


# The torch.compile call whose backend is compiling now: set by `kernelscope run`
# (compiler/trace/own_run.py) around each Dynamo compile of a call it saw, read by TraceDir.dynamo.
_COMPILE_CALL: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "kernelscope_compile_call", default=None)


@contextlib.contextmanager
def compile_call(call: dict[str, Any]) -> Iterator[None]:
    """While Dynamo compiles for `call` (the torch.compile call: its site and arguments)."""
    token = _COMPILE_CALL.set(call)
    try:
        yield
    finally:
        _COMPILE_CALL.reset(token)


def _break_site(reason: Any) -> dict[str, Any] | None:
    """The user's line where Dynamo broke the graph (the innermost frame it reports)."""
    for frame in reversed(list(getattr(reason, "user_stack", None) or [])):
        path = getattr(frame, "filename", "")
        if path and not path.startswith((*_HERE, _TORCH)):
            return {"file": path, "line": frame.lineno, "function": frame.name,
                    "code": (frame.line or "").strip()[:300]}
    return None


def changed_config() -> dict[str, str]:
    """Dynamo's and AOTAutograd's settings the script moved off their defaults, as text
    (the config a compile ran under, as tlparse users ask for it)."""
    import torch._dynamo.config as dynamo_config
    import torch._functorch.config as functorch_config

    out: dict[str, str] = {}
    for prefix, module in (("dynamo", dynamo_config), ("functorch", functorch_config)):
        try:
            for name, value in module.get_config_copy().items():
                entry = module._config.get(name)  # type: ignore[attr-defined]
                moved = not module._is_default(name)  # type: ignore[attr-defined]
                # torch patches some settings itself while it compiles (to their defaults)
                if moved and (entry is None or entry.default != value):
                    out[f"{prefix}.{name}"] = repr(value)[:200]
        except Exception:  # a private API of torch's config modules: absent means unknown
            continue
    return dict(list(out.items())[:100])


def graph_file(gm: torch.fx.GraphModule) -> str | None:
    """The file most of the graph's nodes point into (their innermost user frame)."""
    counts: dict[str, int] = {}
    for n in gm.graph.nodes:
        frames = [m.group("file") for m in _FRAME.finditer(n.meta.get("stack_trace") or "")
                  if not m.group("file").startswith((*_HERE, _TORCH))]
        if frames:
            counts[frames[-1]] = counts.get(frames[-1], 0) + 1
    return max(counts, key=lambda f: counts[f]) if counts else None


@dataclass
class DynamoInfo:
    """What the backend knows of the Dynamo compile an ATen graph came from."""

    compile_id: str | None
    dynamo_graph: int
    graph_break: str | None = None
    call_site: dict[str, Any] | None = None
    graph_break_site: dict[str, Any] | None = None
    compile_call: dict[str, Any] | None = None  # the torch.compile call (kernelscope run)
    recompile: bool = False
    reasons: list[str] = field(default_factory=list)
    split: dict[str, Any] | None = None  # a DDP bucket's graph (capture/ddp_split.py)


@dataclass
class GraphRecorder:
    """One graph's recorder (compile_fx's `trace`): its kernels numbered on from the
    directory's earlier graphs, its file written once every stage has run."""

    folder: TraceDir
    info: DynamoInfo | None
    kind: str | None

    def numbers(self) -> contextlib.AbstractContextManager[KernelNumbers]:
        return numbered_in(self.folder.root)

    def __call__(self, work: Any, payloads: dict[str, Any], ms: dict[str, float]) -> None:
        from kernelscope.compiler.capture.fxgraph import graph_json

        info, kind = self.info, self.kind
        capture = graph_json(work.gm, 0, work.lines, work.code_lines)
        capture.update(kind=kind or "inference", compile_id=info.compile_id if info
                       else None, dynamo_graph=info.dynamo_graph if info else 0)
        self.folder.write(info, kind, work.gm, {"capture": capture, **payloads}, ms)


@dataclass
class TraceDir:
    """Writes one file per compiled ATen graph into `root` (created if missing)."""

    root: Path
    options_json: dict[str, Any]
    dynamo_graphs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, directory: str, options_json: dict[str, Any]) -> TraceDir:
        root = rank_dir(Path(directory).expanduser())
        root.mkdir(parents=True, exist_ok=True)
        _structured_log()
        return cls(root, options_json)

    def dynamo(self, gm: torch.fx.GraphModule) -> DynamoInfo:
        """Called as Dynamo hands the backend a graph."""
        cid = torch._guards.CompileContext.current_compile_id()
        compile_id = None if cid is None else str(cid)
        reason = getattr(gm, "compile_subgraph_reason", None)
        broke = reason is not None and getattr(reason, "graph_break", False)
        text = str(getattr(reason, "reason", "")).strip().splitlines() if broke else []
        log = _structured_log()
        with log.lock:  # type: ignore[union-attr]
            reasons = list(log.reasons.get(compile_id or "", []))
        with self.lock:
            n = self.dynamo_graphs
            self.dynamo_graphs += 1
        attempt = (compile_id or "0/0").split("/")[-1]
        bucket = ddp_bucket(gm)
        return DynamoInfo(compile_id, n, text[0][:500] if text else None, call_site(),
                          _break_site(reason) if broke else None, _COMPILE_CALL.get(),
                          recompile=attempt.isdigit() and int(attempt) > 0, reasons=reasons,
                          split=bucket.as_json() if bucket is not None else None)

    def recorder(self, info: DynamoInfo | None, kind: str | None) -> GraphRecorder:
        """compile_fx's `trace`: writes the graph's file once every stage has run."""
        return GraphRecorder(self, info, kind)

    def write(self, info: DynamoInfo | None, kind: str | None, gm: torch.fx.GraphModule,
              payloads: dict[str, Any], ms: dict[str, float] | None = None) -> Path:
        """One compiled graph's file. `payloads`: stage name -> that stage's one graph;
        `ms`: stage name -> how long it took."""
        filename = graph_file(gm)
        code = ""
        if filename is not None:
            try:
                code = Path(filename).read_text(errors="replace")[:MAX_CODE]
            except OSError:
                code = ""
        # `compiler.backend` makes a backend (and a TraceDir) per Dynamo graph: files are
        # ordered by when they were written, and named so that no two collide.
        seq = time.time_ns()
        info = info or DynamoInfo(None, 0)
        record = {
            "format": FORMAT, "version": VERSION, "schema": SCHEMA_VERSION,
            "versions": versions(str(self.options_json.get("device", CPU))),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seq": seq, "kind": kind or "inference", "options": self.options_json,
            "compile_id": info.compile_id, "dynamo_graph": info.dynamo_graph,
            "recompile": info.recompile, "reasons": info.reasons,
            "graph_break": info.graph_break, "graph_break_site": info.graph_break_site,
            "call_site": info.call_site, "compile_call": info.compile_call,
            "split": info.split,
            "config": changed_config(),
            "filename": filename, "code": code,
            "stages": {k: ev.to_json(v) for k, v in payloads.items()},
            "ms": {k: round(v, 3) for k, v in (ms or {}).items()},
        }
        safe = re.sub(r"[^0-9A-Za-z]+", "_", info.compile_id or "x")
        path = self.root / f"{seq}_{os.getpid()}_compile_{safe}_{kind or 'inference'}.json"
        write_atomic(path, json.dumps(record))
        return path
