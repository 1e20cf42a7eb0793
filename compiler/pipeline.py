"""The pipeline: a flat list of named stages, each timed and reported as one event.

    source -> capture -> lowering -> scheduling -> memory -> codegen -> compile -> run
           -> profile -> done

`run_pipeline` is a generator of StageEvents (docs/events.md). A failure in any stage
becomes an `error` event naming the stage (and the user's line where known), followed
by `done` with ok=false; nothing after it runs.
"""

from __future__ import annotations

import contextlib
import io
import platform
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from compiler.capture.dynamo import Recorder
from compiler.capture.fxgraph import graph_json
from compiler.compile_fx import (
    GraphWork,
    build_stage,
    codegen_stage,
    lower,
    make_backend,
    memory_stage,
    schedule_stage,
)
from compiler.events import StageEvent
from compiler.ir.handlers import dtype_name
from compiler.options import CompileOptions
from compiler.runtime.cache import cache_root
from compiler.runtime.cpp_build import BuildError
from compiler.runtime.profile import compare_outputs, profile
from compiler.runtime.timing import KernelLaunchError
from compiler.snippet import Entry, SnippetError, run_snippet, user_line_of, write_snippet


class StageFailed(Exception):
    def __init__(self, stage: str, kind: str, message: str, line: int | None = None,
                 tb: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.data = {"stage": stage, "kind": kind, "message": message, "line": line,
                     "traceback": tb, **extra}


class _Run:
    """State shared by the stages of one pipeline run (passed explicitly, never global)."""

    def __init__(self, code: str, options: CompileOptions, path: Path) -> None:
        self.code, self.options, self.path = code, options, path
        self.code_lines = code.splitlines()
        self.entry: Entry | None = None
        self.works: list[GraphWork] = []
        self.compiled: list[Any] = []
        self.compiled_fn: Callable[..., Any] | None = None


def run_pipeline(code: str, options: CompileOptions, filename: str | None = None
                 ) -> Iterator[StageEvent]:
    path = Path(filename) if filename else write_snippet(code, cache_root(options.cache_dir)
                                                         / "snippets")
    if filename and not path.exists():
        path.write_text(code)
    run = _Run(code, options, path)
    seq = 0
    stages: list[tuple[str, Callable[[_Run], dict[str, Any]]]] = [
        ("source", _source), ("capture", _capture), ("lowering", _per_graph(lower)),
        ("scheduling", _per_graph(schedule_stage)), ("memory", _per_graph(memory_stage)),
        ("codegen", _per_graph(codegen_stage)), ("compile", _compile), ("run", _run_stage),
        ("profile", _profile),
    ]
    for name, fn in stages:
        start = time.perf_counter()
        printed = io.StringIO()
        try:
            # The snippet's own prints must not mix with our output (NDJSON on stdout).
            with torch.no_grad(), contextlib.redirect_stdout(printed):
                data = fn(run)
            if printed.getvalue():
                data["stdout"] = printed.getvalue()[-8000:]
        except StageFailed as e:
            yield StageEvent(seq, "error", 0.0, e.data)
            yield StageEvent(seq + 1, "done", 0.0, {"ok": False})
            return
        except Exception as e:  # a compiler bug or an unsupported construct: report it
            yield StageEvent(seq, "error", 0.0, _error_data(name, e, path))
            yield StageEvent(seq + 1, "done", 0.0, {"ok": False})
            return
        yield StageEvent(seq, name, (time.perf_counter() - start) * 1000, data)
        seq += 1
    yield StageEvent(seq, "done", 0.0, {"ok": True})


def _error_data(stage: str, e: BaseException, path: Path) -> dict[str, Any]:
    kind = "build" if isinstance(e, BuildError) else "exception"
    data: dict[str, Any] = {"stage": stage, "kind": kind,
                            "message": f"{type(e).__name__}: {e}",
                            "line": user_line_of(e, path),
                            "traceback": traceback.format_exc(limit=-12)}
    if isinstance(e, BuildError):
        data.update(kernel=e.kernel, log=e.log)
    return data


def _per_graph(fn: Callable[[GraphWork], dict[str, Any]]) -> Callable[[_Run], dict[str, Any]]:
    def stage(run: _Run) -> dict[str, Any]:
        return {"graphs": [fn(w) for w in run.works]}

    return stage


def _versions(device: str) -> dict[str, Any]:
    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    gpu = torch.cuda.get_device_name() if device == "cuda" and torch.cuda.is_available() else None
    from compiler import __version__

    return {"python": platform.python_version(), "torch": torch.__version__,
            "triton": triton_version, "gpu": gpu, "kernelscope": __version__}


def _spec(name: str, t: Any) -> dict[str, Any]:
    if isinstance(t, torch.Tensor):
        return {"name": name, "shape": list(t.shape), "stride": list(t.stride()),
                "dtype": dtype_name(t.dtype), "device": t.device.type}
    return {"name": name, "value": repr(t)[:80]}


def _source(run: _Run) -> dict[str, Any]:
    opts = run.options
    if opts.device == "cuda" and not torch.cuda.is_available():
        raise StageFailed("source", "unsupported", "device 'cuda' requested but no GPU is "
                          "available on this host; use device 'cpu'")
    try:
        run.entry = entry = run_snippet(run.path, opts.device, opts.entry)
    except SnippetError as e:
        raise StageFailed("source", e.kind, e.message, e.line, e.tb) from e
    try:
        params = list(__import__("inspect").signature(
            entry.fn.forward if isinstance(entry.fn, torch.nn.Module) else entry.fn
        ).parameters)
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) else f"arg{i}" for i in range(len(entry.inputs))]
    backend = opts.resolved_backend()
    return {"code": run.code, "filename": run.path.name, "entry": entry.name,
            "entry_line": entry.line,
            "inputs": [_spec(n, t) for n, t in zip(names, entry.inputs)],
            "device": opts.device, "backend": backend,
            "triton_interpret": backend == "triton" and opts.device == "cpu",
            "options": opts.to_json(), "versions": _versions(opts.device)}


def _call_entry(run: _Run, backend: Callable[..., Any] | None,
                fn: Callable[..., Any] | None = None) -> Any:
    entry = run.entry
    assert entry is not None
    if fn is None:
        fn = torch.compile(entry.fn, backend=backend) if backend is not None else entry.fn
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in entry.inputs]
    try:
        return fn(*args, **entry.kwargs)
    except Exception as e:
        line = user_line_of(e, run.path)
        stage = "capture" if backend is not None else "run"
        raise StageFailed(stage, "exception", f"{type(e).__name__}: {str(e)[:2000]}", line,
                          traceback.format_exc(limit=-8)) from e


def _capture(run: _Run) -> dict[str, Any]:
    torch._dynamo.reset()
    recorder = Recorder()
    _call_entry(run, recorder.backend)
    breaks = _graph_breaks(run) if recorder.dynamo_graphs > 1 else []
    run.works = [GraphWork(i, g.gm, g.example_inputs, run.options, str(run.path),
                           run.code_lines) for i, g in enumerate(recorder.graphs)]
    return {"graphs": [graph_json(w.gm, w.gid, w.lines, run.code_lines) for w in run.works],
            "graph_breaks": breaks, "dynamo_graphs": recorder.dynamo_graphs}


def _graph_breaks(run: _Run) -> list[dict[str, Any]]:
    entry = run.entry
    assert entry is not None
    torch._dynamo.reset()
    try:
        explained = torch._dynamo.explain(entry.fn)(*entry.inputs, **entry.kwargs)
    except Exception:
        return []
    out = []
    for reason in explained.break_reasons:
        line = None
        for frame in getattr(reason, "user_stack", []) or []:
            if frame.filename == str(run.path):
                line = frame.lineno
        out.append({"reason": str(reason.reason).strip().splitlines()[0][:500], "line": line})
    return out


def _compile(run: _Run) -> dict[str, Any]:
    graphs = []
    for w in run.works:
        try:
            graphs.append(build_stage(w))
        except BuildError as e:
            raise StageFailed("compile", "build", str(e), None, e.log, kernel=e.kernel) from e
        except KernelLaunchError as e:
            raise StageFailed("compile", "build", str(e)[:4000], None,
                              traceback.format_exc(limit=-6), kernel=e.kernel) from e
    return {"graphs": graphs}


def _run_stage(run: _Run) -> dict[str, Any]:
    torch._dynamo.reset()
    run.compiled = []
    backend = make_backend(run.options, str(run.path), sink=run.compiled)
    entry = run.entry
    assert entry is not None
    run.compiled_fn = torch.compile(entry.fn, backend=backend)
    out = _call_entry(run, None, run.compiled_fn)
    ref = _call_entry(run, None)
    return compare_outputs(out, ref, run.options.atol, run.options.rtol)


def _profile(run: _Run) -> dict[str, Any]:
    entry = run.entry
    assert entry is not None
    kernel_bytes = {}
    for w in run.works:
        for step in w.sched.steps if w.sched else []:
            if step.plan is not None:
                plan = step.plan
                kernel_bytes[step.name] = sum(plan.buffers[b].layout.nbytes()
                                              for b in plan.inputs + plan.stores)
    return profile(entry, run.compiled, run.options, run.path, run.compiled_fn, kernel_bytes)
