"""The pipeline: a flat list of named stages, each timed and reported as one event.

    front half (runs the snippet):  source -> capture            => capture bundle (a file)
    back half (our code only):      lowering -> scheduling -> memory -> codegen -> compile
                                    -> run -> profile [-> inductor] -> done

`run_front` runs the snippet, captures its ATen graphs and writes them with their inputs
to a bundle (compiler/capture/bundle.py); `run_back` reads a bundle, checks it, rebuilds
the graphs and runs the stages after capture on them: `run` compares each compiled graph
against the same graph run eagerly here, and `profile` times the same pair. Nothing in the
back half calls the snippet's code, so a server can run the halves in two processes and
trust what the back half says (docs/architecture.md, "Trust boundary"). `run_pipeline`
does both in one process (the CLI, the tests), through the same bundle file.

Every function here is a generator of StageEvents (docs/events.md). A failure in any stage
becomes an `error` event naming the stage (and the user's line where known), followed by
`done` with ok=false; nothing after it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from kernelscope.compiler import check, training
from kernelscope.compiler.blame import blame
from kernelscope.compiler.capture.bundle import (
    Bundle,
    BundleError,
    BundleGraph,
    read_bundle,
    snapshot,
)
from kernelscope.compiler.capture.front import (
    FrontRun,
    StageFailed,
    capture_stage,
    source_stage,
    write_front_bundle,
)
from kernelscope.compiler.capture.fxgraph import graph_json, node_lines
from kernelscope.compiler.capture.specialise import specialise
from kernelscope.compiler.codegen.backend import BuildError
from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.compare.match import Group, KernelRef, match
from kernelscope.compiler.compile_fx import (
    build_library,
    build_stage,
    codegen_stage,
    lower,
    memory_stage,
    schedule_stage,
)
from kernelscope.compiler.devices import is_gpu
from kernelscope.compiler.events import types as ev
from kernelscope.compiler.events.stage import StageEvent
from kernelscope.compiler.follow_ups import follow_ups
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.kernel_numbers import KernelNumbers
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.profiling import each, profile_works
from kernelscope.compiler.progress import Heartbeat
from kernelscope.compiler.runtime.cache import cache_root
from kernelscope.compiler.runtime.graphs import CudaGraphed
from kernelscope.compiler.runtime.inductor import Graphs
from kernelscope.compiler.runtime.loader import later_reports
from kernelscope.compiler.runtime.profile import inductor_profile
from kernelscope.compiler.runtime.timing import KernelLaunchError
from kernelscope.compiler.schedule.scheduler import schedule_json
from kernelscope.compiler.snippet import SnippetError, captured_stdout, user_line_of, write_snippet
from kernelscope.compiler.versions import versions

R = TypeVar("R")
FRONT_STAGES = ("source", "capture")
STDOUT_LIMIT = 8000


@dataclass
class _Seq:
    """Numbers the events of one stream."""

    next: int = 0

    def event(self, stage: str, ms: float, data: Any) -> StageEvent:
        """`data`: the stage's typed payload (compiler/events/types.py), made JSON here; a
        dict only for what is replayed from a bundle as it was stored."""
        event = StageEvent(self.next, stage, ms, data if isinstance(data, dict)
                           else ev.to_json(data))
        self.next += 1
        return event


def _fail(seq: _Seq, data: ev.Error | dict[str, Any], isolated: bool = False
          ) -> Iterator[StageEvent]:
    yield seq.event("error", 0.0, data)
    yield seq.event("done", 0.0, ev.Done(ok=False, isolated=isolated))


def _error_data(stage: str, e: BaseException, path: Path | None) -> ev.Error:
    if isinstance(e, StageFailed):
        return ev.Error(**e.data)
    if isinstance(e, SnippetError):
        return ev.Error(stage, e.kind, e.message, e.line, e.tb)  # type: ignore[arg-type]
    kind: ev.ErrorKind = "build" if isinstance(e, BuildError) else \
        "bundle" if isinstance(e, BundleError) else "exception"
    err = ev.Error(stage, kind, f"{type(e).__name__}: {e}",
                   user_line_of(e, path) if path else None, traceback.format_exc(limit=-12))
    if isinstance(e, BuildError):
        err.kernel, err.log = e.kernel, e.log
    return err


def _back_error(stage: str, e: BaseException, run: _BackRun) -> ev.Error:
    """A back stage's failure, blamed on the snippet's graph or cut to the compiler's own
    words (compiler/blame.py)."""
    return blame(_error_data(stage, e, None), e, run.graphs)


def _compiler_facts(options: CompileOptions) -> dict[str, Any]:
    """What `source` says about the compiler: stated by the process that compiles."""
    backend = choose_backend(options.backend, options.device, options)
    return {**backend.to_json(), "triton_interpret": backend.emulated,
            "device": options.device, "options": options.to_json(),
            "versions": versions(options.device)}


def _replayed_source(events: dict[str, Any], options: CompileOptions) -> dict[str, Any]:
    """The front's `source` (the snippet's words: code, entry, inputs, stdout) with the
    compiler's facts (backend, options, versions) stated here, never taken from the bundle."""
    return {**events["source"]["data"], **_compiler_facts(options)}


# -- front half ----------------------------------------------------------------------------
def run_front(code: str, options: CompileOptions, bundle_path: str | Path,
              filename: str | None = None, _seq: _Seq | None = None,
              parts: Callable[[StageEvent], None] | None = None) -> Iterator[StageEvent]:
    """Run the snippet (`source`, `capture`) and write the capture bundle.

    Yields `source`, one `capture_graph` per graph, and `capture` (or `error` then `done`).
    The bundle is written in every case where this function returns: after a failure it
    holds the error, so the back half can report it. `filename` is where the snippet is
    (or is written) for line numbers. `parts`, if given, receives each `capture_graph`
    event the moment its graph is captured (in the middle of the snippet's call, so a
    stream can show it while Dynamo goes on), and a `progress` event whenever a stage has
    been quiet for a while (compiler/progress.py); without it the graphs are yielded
    before `capture`, and no `progress` is made. Call it from the main thread of a worker
    process: while the snippet runs, fd 1 is a pipe, and a flood of output interrupts it.
    """
    path = Path(filename) if filename else write_snippet(code, cache_root(options.cache_dir)
                                                         / "snippets")
    if filename and not path.exists():
        path.write_text(code)
    run = FrontRun(code, options, path)
    seq = _Seq() if _seq is None else _seq
    held: list[StageEvent] = []  # the parts, when nobody takes them as they come
    start = time.perf_counter()
    beat = _heartbeat(seq, parts)

    def part(graph: ev.CaptureGraph) -> None:
        def make() -> StageEvent:
            return seq.event("capture_graph", (time.perf_counter() - start) * 1000, graph)

        if parts is None:
            held.append(make())
        else:
            beat.send(lambda: parts(make()))

    stages: tuple[tuple[str, Callable[[FrontRun], dict[str, Any]]], ...] = (
        ("source", source_stage), ("capture", lambda r: capture_stage(r, part, beat.doing)))
    for name, fn in stages:
        start = time.perf_counter()
        try:
            # The snippet's prints (Python or fd 1) are data: they never reach our output.
            with captured_stdout(STDOUT_LIMIT) as printed, beat.stage(name):
                data = fn(run)
        except Exception as e:  # StageFailed, or a compiler bug / unsupported construct
            err = _error_data(name, e, path)
            run.events["error"] = {"ms": 0.0, "data": ev.to_json(err)}
            write_front_bundle(run, bundle_path)
            yield from held
            yield from _fail(seq, err)
            return
        payload = ev.to_json(_front_payload(name, data, options, printed()))  # once: big
        ms = (time.perf_counter() - start) * 1000
        run.events[name] = {"ms": ms, "data": payload}
        yield from held
        held.clear()
        yield seq.event(name, ms, payload)
    try:
        with beat.stage("capture", "writes the capture bundle"):
            write_front_bundle(run, bundle_path)
    except Exception as e:  # a value the bundle cannot carry: say which
        yield from _fail(seq, _error_data("capture", e, path))


def _heartbeat(seq: _Seq, parts: Callable[[StageEvent], None] | None) -> Heartbeat:
    """The stream's heartbeat: `progress` events into `parts`, or none without it."""
    if parts is None:
        return Heartbeat(None)
    return Heartbeat(lambda p: parts(seq.event("progress", 0.0, p)))


def _front_payload(name: str, data: dict[str, Any], options: CompileOptions, stdout: str
                   ) -> ev.Source | ev.Capture:
    """The front stage's payload, typed: the snippet's side (`data`), the compiler's facts
    (for `source`) and what the snippet printed."""
    if name == "source":
        return ev.Source(**{**data, **_compiler_facts(options)}, stdout=stdout)
    return ev.Capture(**data, stdout=stdout)


# -- back half -----------------------------------------------------------------------------
@dataclass
class _BackRun:
    """State shared by the back half's stages (passed explicitly, never global)."""

    bundle: Bundle
    options: CompileOptions
    code_lines: list[str] = field(default_factory=list)  # the submitted code's
    graphs: list[tuple[BundleGraph, torch.fx.GraphModule, list[Any]]] = field(
        default_factory=list)
    works: list[GraphWork] = field(default_factory=list)
    ok: bool = True  # false once `run` finds an output that differs from eager
    profile: ev.Profile | None = None  # our kernels' times, for the Inductor comparison
    beat: Heartbeat = field(default_factory=lambda: Heartbeat(None))  # says what runs


def run_back(bundle_path: str | Path, options: CompileOptions, replay: bool = True,
             isolated: bool = True, _seq: _Seq | None = None, replay_source: bool = True,
             code: str | None = None, parts: Callable[[StageEvent], None] | None = None
             ) -> Iterator[StageEvent]:
    """Read a capture bundle and run every stage after capture on its graphs.

    With `replay`, first yields the front half's `source` (unless not `replay_source`: a
    server that streamed the front's own) and `capture` events from the bundle (their data
    marked `"origin": "snippet"`; capture's graphs are re-rendered from the rebuilt graphs).
    `isolated` goes into `done`: true when this process never ran the snippet (the caller
    knows; run_pipeline says false). `code`: the submitted snippet, the only source text
    kernel comments quote (never the bundle's copy, which the snippet could rewrite);
    without it they quote none. `parts`, if given, receives a `progress` event whenever a
    stage has been quiet for a while (compiler/progress.py).
    """
    seq = _Seq() if _seq is None else _seq
    try:
        bundle = read_bundle(bundle_path)
    except BundleError as e:
        yield from _fail(seq, ev.Error("lowering", "bundle", str(e)), isolated=isolated)
        return
    events = bundle.events
    if "error" in events:
        if replay and replay_source and "source" in events:
            yield seq.event("source", events["source"]["ms"], _replayed_source(events, options))
        yield from _fail(seq, events["error"]["data"], isolated=isolated)
        return
    run = _BackRun(bundle, options, (code or "").splitlines(), beat=_heartbeat(seq, parts))
    for stage, prepare, doing in (("capture", _rebuild, "rebuilds the bundle's graphs"),
                                  ("lowering", _make_works, "specialises the graphs")):
        try:
            with run.beat.stage(stage, doing):
                prepare(run)
        except Exception as e:
            yield from _fail(seq, _error_data(stage, e, None), isolated=isolated)
            return
    code_lines = run.code_lines
    if replay:
        if replay_source:
            yield seq.event("source", events["source"]["ms"],
                            _replayed_source(events, options))
        capture = dict(events["capture"]["data"])
        capture["graphs"] = [  # as captured (a dynamic graph with its symbolic sizes)
            {**graph_json(gm, g.id, node_lines(gm, bundle.snippet_path), code_lines),
             "kind": g.kind, "dynamo_graph": g.dynamo_graph, "compile_id": g.compile_id}
            for g, gm, _ in run.graphs]
        yield seq.event("capture", events["capture"]["ms"], capture)
    asked = follow_ups(options)
    later = [(name, fn) for name, fn in FOLLOW_UP_STAGES if name in asked]
    for name, fn in (*BACK_STAGES, *later):
        start = time.perf_counter()
        try:
            # Our own code only: anything it prints goes to stderr, never into the stream.
            with torch.no_grad(), contextlib.redirect_stdout(sys.stderr), run.beat.stage(name):
                data = fn(run)
        except Exception as e:
            yield from _fail(seq, _back_error(name, e, run), isolated=isolated)
            return
        yield seq.event(name, (time.perf_counter() - start) * 1000, data)
    yield seq.event("done", 0.0, ev.Done(ok=run.ok, isolated=isolated))


def run_pipeline(code: str, options: CompileOptions, filename: str | None = None,
                 bundle_path: str | Path | None = None,
                 parts: Callable[[StageEvent], None] | None = None) -> Iterator[StageEvent]:
    """Both halves in this process, through a bundle file (the CLI and the tests).

    The bundle is written to `bundle_path` if given, else to a temporary file; `parts` as
    in `run_front`.
    """
    seq = _Seq()
    with tempfile.TemporaryDirectory(prefix="kernelscope-") as tmp:
        bundle = Path(bundle_path) if bundle_path else Path(tmp) / "capture.ksb"
        failed = False
        for ev in run_front(code, options, bundle, filename, _seq=seq, parts=parts):
            failed = failed or ev.stage == "error"
            yield ev
        if not failed:
            yield from run_back(bundle, options, replay=False, isolated=False, _seq=seq,
                                code=code, parts=parts)


def _rebuild(run: _BackRun) -> None:
    with torch.no_grad():
        run.graphs = run.bundle.rebuild(run.options.device)


def _make_works(run: _BackRun) -> None:
    run.works = [_work(g.id, gm, inputs, run.options, run.bundle.snippet_path, run.code_lines,
                       g.kind)
                 for g, gm, inputs in run.graphs]


def compiled_works(bundle_path: str | Path, options: CompileOptions) -> list[GraphWork]:
    """A bundle's graphs through lowering .. compile, without events (tests and tools):
    each GraphWork's `compiled` is what the `run` stage runs."""
    run = _BackRun(read_bundle(bundle_path), options)
    _rebuild(run)
    _make_works(run)
    for name, fn in BACK_STAGES:
        if name in ("run", "profile"):
            break
        with torch.no_grad():
            fn(run)
    return run.works


def _work(gid: int, gm: torch.fx.GraphModule, inputs: list[Any], options: CompileOptions,
          filename: str | None, code_lines: list[str], kind: str | None) -> GraphWork:
    """One graph's work; a dynamic-shape graph is specialised to its captured call."""
    gm, inputs, note = specialise(gm, inputs)
    work = GraphWork(gid, gm, inputs, options, filename, code_lines, kind)
    if note:
        work.notes.append(note)
    return work


# -- the back half's stages ----------------------------------------------------------------
def _per_graph(fn: Callable[[GraphWork], Any], payload: Callable[..., Any]
               ) -> Callable[[_BackRun], Any]:
    """A stage that runs `fn` on each graph; `payload` is its event type (one of graphs)."""
    def stage(run: _BackRun) -> Any:
        return payload(graphs=[fn(w) for w in _each_graph(run)])

    return stage


def _each_graph(run: _BackRun, doing: str = "") -> Iterator[GraphWork]:
    """The graphs in order, each said in the `progress` events as it begins."""
    for i, w in enumerate(run.works):
        run.beat.doing(f"graph {w.gid}{doing}", i, len(run.works))
        yield w


def _schedule(run: _BackRun) -> ev.Scheduling:
    """Each graph's schedule; its kernels are numbered on from the graph before it, so the
    names are unique across the trace (a forward's and a backward's `_0` were one name)."""
    numbers = KernelNumbers()
    return ev.Scheduling(graphs=[numbers.schedule(w, schedule_stage) for w in _each_graph(run)])


def _training_pairs(run: _BackRun) -> list[tuple[int, int]]:
    return training.pairs([(g.kind, g.dynamo_graph) for g, _, _ in run.graphs])


def _memory(run: _BackRun) -> ev.Memory:
    """Each graph's memory plan; a forward graph's also lists what it saves for backward."""
    graphs = [memory_stage(w) for w in _each_graph(run)]
    for fw, bw in _training_pairs(run):
        graphs[fw].saved = [ev.SavedActivation(**s) for s in
                            training.saved_activations(run.works[fw], run.works[bw])]
    return ev.Memory(graphs=graphs)


def _compile(run: _BackRun) -> ev.Compile:
    # Every graph's library builds at once (a forward and a backward graph: two g++ runs
    # side by side); each graph is then loaded and first launched in order.
    graphs, n = [], len(run.works)
    run.beat.doing(f"builds {n} graph{'s' if n > 1 else ''} at once", 0, n)
    with ThreadPoolExecutor(max_workers=max(1, min(len(run.works), run.options.workers()))
                            ) as pool:
        builds = [pool.submit(build_library, w) for w in run.works]
        _say_each_built(run, builds)
        for w, built in zip(run.works, builds, strict=True):
            try:
                graphs.append(build_stage(w, built=built.result()))
            except BuildError as e:
                raise StageFailed("compile", "build", str(e), None, e.log,
                                  kernel=e.kernel) from e
            except KernelLaunchError as e:
                raise StageFailed("compile", "build", str(e)[:4000], None,
                                  traceback.format_exc(limit=-6), kernel=e.kernel) from e
    return ev.Compile(graphs=graphs)


def _say_each_built(run: _BackRun, builds: list[Future[Any]]) -> None:
    """Each build, as it ends, is said in the `progress` events (by the thread that ran
    it): "graph 1 built [1/2]"."""
    ended = itertools.count(1)

    def said(_: Future[Any], gid: int) -> None:
        run.beat.doing(f"graph {gid} built; then each graph is loaded and first launched",
                       next(ended), len(builds))

    for w, build in zip(run.works, builds, strict=True):
        build.add_done_callback(functools.partial(said, gid=w.gid))


def _fresh(inputs: list[Any]) -> list[Any]:
    return [snapshot(a) if isinstance(a, torch.Tensor) else a for a in inputs]


def _compiled(w: GraphWork) -> Callable[..., Any]:
    assert w.compiled is not None, "compile stage did not run"
    return w.compiled


def _run_stage(run: _BackRun) -> ev.Run:
    """Each compiled graph (the one `compile` built) against the same graph run eagerly."""
    graphs: list[ev.RunGraph] = []
    outputs: list[ev.OutputCheck] = []
    how = set()
    for w in _each_graph(run, ": eager, then compiled"):
        ref, reference_text = check.reference(w.gm, _fresh(w.example_inputs))
        how.add(reference_text)
        out = _compiled(w)(*_fresh(w.example_inputs))
        result = check.compare_outputs(out, ref, run.options)
        graphs.append(ev.RunGraph(w.gid, result["ok"], result["outputs"], reference_text,
                                  _cuda_graph(w, run.options)))
        outputs += [dataclasses.replace(o, graph=w.gid, index=len(outputs) + i)
                    for i, o in enumerate(result["outputs"])]
    # Training: each backward graph again, on the activations the compiled forward saved.
    run.beat.doing("each backward graph on what the compiled forward saved")
    chained = [ev.ChainedCheck(**training.chained_check(run.works[fw], run.works[bw], _fresh,
                                                       run.options))
               for fw, bw in _training_pairs(run)]
    run.ok = all(g.ok for g in graphs) and all(c.ok for c in chained)
    return ev.Run(ok=run.ok, outputs=outputs, atol=run.options.atol, rtol=run.options.rtol,
                  graphs=graphs, chained=chained,
                  reference="; ".join(sorted(how)) + ", on the captured inputs")


def _cuda_graph(w: GraphWork, options: CompileOptions) -> ev.CudaGraphStatus | None:
    """With cuda_graphs on a GPU: the graph called as a training loop calls it (the first
    call builds, the second records, the third replays), and what that showed."""
    if not options.cuda_graphs or w.backend is None or not is_gpu(w.backend.device):
        return None
    graphed = CudaGraphed(_compiled(w), (), list(w.mutations.values()), None, "inference")
    for _ in range(3):
        graphed(*_fresh(w.example_inputs))
    s = graphed.status()
    return ev.CudaGraphStatus(s["recorded"], s["replays"], s["why_not"], s["plain_runs"])


def _profile(run: _BackRun) -> ev.Profile:
    run.profile = profile_works(run.works, [_fresh(w.example_inputs) for w in run.works],
                                run.options, run.beat.doing)
    return run.profile


def _inductor(run: _BackRun) -> ev.Inductor:
    """TorchInductor on the same graphs, once our result has streamed. Its failure is a
    result to show in this event, never the job's error."""
    def build(graphs: Graphs) -> Callable[[], None]:
        torch._dynamo.reset()
        return each([torch.compile(w.gm, backend=graphs.backend(w.gid, w.gm))
                     for w in run.works], [_fresh(w.example_inputs) for w in run.works])

    try:
        data = inductor_profile(build, run.options)
    except Exception as e:  # e.g. timing a kernel Inductor made
        data = {"measured": False, "code": [], "kernels": [], "reason": "TorchInductor failed",
                "error": f"{type(e).__name__}: {e}"[:2000]}
    kernels = [ev.InductorKernel(**k) for k in data.pop("kernels")]
    return ev.Inductor(**data, kernels=kernels, groups=_groups(run, kernels))


def _groups(run: _BackRun, theirs: list[ev.InductorKernel]) -> list[Group]:
    """Our kernels against Inductor's, by the FX nodes each covers (none where Inductor's
    kernels came without their nodes)."""
    if not any(k.nodes for k in theirs):
        return []
    timed = {(t.get("graph", 0), t["name"]): t
             for t in map(_plain, run.profile.kernels if run.profile else [])}
    ours = [KernelRef(k.name, w.gid, tuple(k.origins), t.get("ms"), t.get("bytes") or None,
                      k.kind)
            for w in run.works if w.sched is not None
            for k in schedule_json(w.sched, w.lines, w.gid).kernels
            for t in [timed.get((w.gid, k.name), {})]]
    return match(ours, [KernelRef(k.call or k.name, k.graph, tuple(k.nodes), k.ms, k.bytes,
                                  k.kind) for k in theirs])


def _plain(k: Any) -> dict[str, Any]:
    return dataclasses.asdict(k) if isinstance(k, ev.KernelTime) else dict(k)


BACK_STAGES: tuple[tuple[str, Callable[[_BackRun], Any]], ...] = (
    ("lowering", _per_graph(lower, ev.Lowering)),
    ("scheduling", _schedule),
    ("memory", _memory), ("codegen", _per_graph(codegen_stage, ev.Codegen)),
    ("compile", _compile), ("run", _run_stage), ("profile", _profile),
)
def _gpu_stages(run: _BackRun) -> ev.GpuStages:
    """Triton's stages of the kernels the interpreter ran, compiled offline for the
    gpu_target (seconds per graph: a child process, ptxas, nvdisasm), after the result."""
    graphs = []
    for w in run.works:
        start = time.perf_counter()
        assert w.compiled is not None, "compile stage did not run"
        reports, kept = later_reports(w.compiled)
        kernels = [ev.BuiltKernel(**{**r, "name": name, "ms": None, "cache_hit": kept})
                   for name, r in reports.items()]
        graphs.append(ev.CompileGraph(id=w.gid, ms=(time.perf_counter() - start) * 1000,
                                      cache_hit=kept, kernels=kernels))
    return ev.GpuStages(graphs=graphs)


# After our own result, only where the options ask for them (compiler/follow_ups.py):
# docs/events.md. The offline stages first: seconds, where Inductor takes tens.
FOLLOW_UP_STAGES: tuple[tuple[str, Callable[[_BackRun], Any]], ...] = (
    ("gpu_stages", _gpu_stages), ("inductor", _inductor),
)
