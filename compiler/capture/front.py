"""The front half's stages, `source` and `capture`: the only code that runs the snippet.

In: the snippet's code and the CompileOptions. Out: each stage's event payload, and in the
end a capture bundle (compiler/capture/bundle.py) holding every ATen graph AOTAutograd
produced, with the real values each was first called with. Whatever the snippet prints
while it runs is kept as data (`stdout` in these payloads), never let through to our own
output.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

import kernelscope.compiler.events.types as ev
from kernelscope.compiler.capture.bundle import BundleWriter, snapshot
from kernelscope.compiler.capture.dynamo import CapturedGraph, Recorder
from kernelscope.compiler.capture.fxgraph import graph_json, node_lines
from kernelscope.compiler.capture.guards import GuardLog
from kernelscope.compiler.devices import CPU, is_gpu
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.snippet import (
    Call,
    Entry,
    SnippetError,
    run_snippet,
    snippet_importable,
    user_line_of,
)


class StageFailed(Exception):
    """A stage's own, expected failure: `data` is the `error` event's payload."""

    def __init__(self, stage: str, kind: str, message: str, line: int | None = None,
                 tb: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.data = {"stage": stage, "kind": kind, "message": message, "line": line,
                     "traceback": tb, **extra}


@dataclass
class FrontRun:
    """State shared by the front half's stages (passed explicitly, never global)."""

    code: str
    options: CompileOptions
    path: Path
    entry: Entry | None = None
    graphs: list[CapturedGraph] = field(default_factory=list)
    events: dict[str, Any] = field(default_factory=dict)  # payloads for the bundle


def _spec(name: str, t: Any) -> ev.InputSpec:
    if isinstance(t, torch.Tensor):
        return ev.InputSpec(name, list(t.shape), list(t.stride()),
                            str(t.dtype).removeprefix("torch."), t.device.type)
    return ev.InputSpec(name, value=repr(t)[:80])


def source_stage(run: FrontRun) -> dict[str, Any]:
    opts = run.options
    if is_gpu(opts.device) and not torch.cuda.is_available():
        raise StageFailed("source", "unsupported", f"device {opts.device!r} requested but no "
                          f"GPU is available on this host; use device {CPU!r}")
    try:
        run.entry = entry = run_snippet(run.path, opts.device, opts.entry)
    except SnippetError as e:
        raise StageFailed("source", e.kind, e.message, e.line, e.tb) from e
    try:
        target = entry.fn.forward if isinstance(entry.fn, torch.nn.Module) else entry.fn
        params = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        params = []
    names = [params[i] if i < len(params) else f"arg{i}" for i in range(len(entry.inputs))]
    # The driver adds the backend this device gets and the versions (capture knows
    # neither codegen nor the package).
    return {"code": run.code, "filename": run.path.name, "entry": entry.name,
            "entry_line": entry.line,
            "inputs": [_spec(n, t) for n, t in zip(names, entry.inputs)],
            "device": opts.device, "options": opts.to_json()}


def capture_stage(run: FrontRun, on_graph: Callable[[ev.CaptureGraph], None] | None = None,
                  doing: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Each of the snippet's calls of its compiled function again, through Dynamo with the
    recording backend, under the grad mode the snippet called it with; where the snippet
    ran backward through a call's result, the same backward (with the gradients it
    brought) runs here too, so AOTAutograd compiles the backward graph.

    `on_graph` is handed each graph as soon as it is captured (while Dynamo goes on);
    `doing` is told what runs now (the `progress` events say it)."""
    entry = run.entry
    assert entry is not None
    torch._dynamo.reset()
    code_lines = run.code.splitlines()
    recorder = Recorder(doing=doing, partition=run.options.partition)
    made: dict[int, ev.CaptureGraph] = {}  # each graph's payload, made once
    if on_graph is not None:
        def hand_over(g: CapturedGraph, i: int) -> None:
            made[i] = _graph_payload(g, i, run.path, code_lines)
            on_graph(made[i])

        recorder.on_graph = hand_over
    log = GuardLog(str(run.path))
    compiled = torch._dynamo.optimize(recorder.backend, guard_fail_fn=log.fail)(entry.fn)
    calls = entry.calls or [Call(entry.inputs, entry.kwargs, True)]
    for i, call in enumerate(calls):
        doing(f"Dynamo traces {entry.name} (call {i + 1} of {len(calls)})")
        args = [_copy(a) for a in call.args]
        recorder.ran.clear()
        try:
            with snippet_importable(entry.module), torch.set_grad_enabled(call.grad_mode):
                out = compiled(*args, **call.kwargs)
                _backward_as_the_snippet_did(out, call)
        except Exception as e:
            if i:  # a later call: its compile says so, the first call's graphs stand
                log.failed(i, e)
                break
            import traceback

            raise StageFailed("capture", "exception", f"{type(e).__name__}: {str(e)[:2000]}",
                              user_line_of(e, run.path), traceback.format_exc(limit=-8)) from e
        log.after_call(i, call, [c for c in recorder.ran if c is not None])
    torch._dynamo.reset()
    run.graphs = recorder.graphs
    graphs = [made[i] if i in made else _graph_payload(g, i, run.path, code_lines)
              for i, g in enumerate(recorder.graphs)]
    return {"graphs": graphs, "graph_breaks": [_break(r, run.path) for r in recorder.breaks],
            "dynamo_graphs": recorder.dynamo_graphs, "compiles": log.compiles,
            "calls": log.calls}


def _graph_payload(g: CapturedGraph, i: int, path: Path, code_lines: list[str]
                   ) -> ev.CaptureGraph:
    info = graph_json(g.gm, i, node_lines(g.gm, str(path)), code_lines)
    return ev.CaptureGraph(**info, kind=cast(ev.GraphKind, g.kind), dynamo_graph=g.dynamo_graph,
                           compile_id=g.compile_id)


def _copy(a: Any) -> Any:
    """A copy with the same strides (the graph is captured for the layout the user made)
    that needs a gradient where the snippet's argument did."""
    if not isinstance(a, torch.Tensor):
        return a
    return snapshot(a).requires_grad_(a.requires_grad)


def _backward_as_the_snippet_did(out: Any, call: Call) -> None:
    if not call.grads:
        return
    from torch.utils._pytree import tree_leaves

    leaves = tree_leaves(out)
    pairs = [(leaves[i], g) for i, g in sorted(call.grads.items())
             if i < len(leaves) and isinstance(leaves[i], torch.Tensor)
             and leaves[i].requires_grad]
    if pairs:
        torch.autograd.backward([t for t, _ in pairs], [g for _, g in pairs])


def _break(reason: Any, path: Path) -> ev.GraphBreak:
    line = None
    for frame in getattr(reason, "user_stack", []) or []:
        if frame.filename == str(path):
            line = frame.lineno
    text = str(getattr(reason, "reason", reason)).strip().splitlines() or [""]
    return ev.GraphBreak(text[0][:500], line)


def write_front_bundle(run: FrontRun, bundle_path: str | Path) -> int:
    """Write what the front half produced; returns the number of graphs in it."""
    writer = BundleWriter()
    for g in run.graphs:
        writer.add_graph(g.gm, g.inputs, g.kind, g.example_inputs, g.dynamo_graph,
                         g.compile_id)
    writer.write(bundle_path, run.events, str(run.path))
    return len(writer.graphs)
