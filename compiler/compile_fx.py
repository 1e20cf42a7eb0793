"""One FX graph down the pipeline: lower, schedule, plan memory, generate, build.

`GraphWork` carries one graph's artifacts from stage to stage; each stage function fills in
its part and returns its event's JSON for this graph. `compile_fx` runs them all (the
torch.compile backend); `pipeline.py` runs each stage across all graphs, reported as it ends.
"""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch
import torch.fx
from torch._functorch.aot_autograd import make_boxed_func

from kernelscope.compiler import dynamo_cache, training
from kernelscope.compiler.capture.aot import through_aot
from kernelscope.compiler.capture.attention import rewrite_attention
from kernelscope.compiler.capture.fxgraph import arg_text
from kernelscope.compiler.codegen.backend import Backend, BuildResult, GeneratedKernel
from kernelscope.compiler.codegen.backends import choose_backend, kernel_backends
from kernelscope.compiler.codegen.wrapper import generate_wrapper
from kernelscope.compiler.devices import is_gpu
from kernelscope.compiler.events import types as ev
from kernelscope.compiler.features import Feature
from kernelscope.compiler.graph_work import GraphWork, graph_device
from kernelscope.compiler.ir.collectives import describe_collective, waited_buffer
from kernelscope.compiler.ir.handlers import describe, dtype_name
from kernelscope.compiler.ir.index_print import pexpr
from kernelscope.compiler.ir.indexing import index_vars
from kernelscope.compiler.ir.nodes import (
    ComputedBuffer,
    ExternKernel,
    ExternOutput,
    Reduction,
    Stored,
)
from kernelscope.compiler.ir.opnames import op_name
from kernelscope.compiler.kernel_numbers import KernelNumbers
from kernelscope.compiler.lowering import layout
from kernelscope.compiler.lowering.common import Unsupported
from kernelscope.compiler.lowering.fold import fold_constants
from kernelscope.compiler.lowering.graph import GraphLowering
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime import graph_cache, loader
from kernelscope.compiler.runtime.autotune import select_templates
from kernelscope.compiler.runtime.graphs import CudaGraphed, GraphPair, static_input_indices
from kernelscope.compiler.schedule.collectives import collective_holds
from kernelscope.compiler.schedule.inplace import in_place_outputs
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.memory import plan_memory
from kernelscope.compiler.schedule.scheduler import schedule, schedule_json
from kernelscope.compiler.trace.writer import TraceDir


# -- stages ------------------------------------------------------------------------------
def lower(work: GraphWork) -> ev.LoweringGraph:
    device = graph_device(work.example_inputs, work.gm)
    work.notes.extend(fold_constants(work.gm, device))  # done already on the backend's path
    work.backend = backend = choose_backend(work.options.backend, device, work.options)
    decision = layout.decide(work.gm, work.kind, work.options.conv_layout,
                             device in backend.target.channels_last_convs,
                             f"{backend.label} on {device}", bool(work.free_outputs),
                             layout.any_nhwc(work.example_inputs))
    lowering = GraphLowering(work.gm, work.example_inputs, work.lines, backend,
                             work.options, decision, work.free_outputs)
    work.lowered = lowered = lowering.run()
    devices = {b.device for b in lowered.buffers if isinstance(b, ComputedBuffer)}
    work.backends = kernel_backends(backend, devices, work.options)
    has_convs = decision is not layout.NO_CONVOLUTIONS
    return ev.LoweringGraph(
        id=work.gid, buffers=[_buffer_json(work, b) for b in lowered.buffers],
        inputs=[ev.LoweringInput(b.name, list(b.layout.size), list(b.layout.stride),
                                 dtype_name(b.dtype)) for b in lowered.inputs],
        outputs=sorted(lowered.output_names()), fallbacks=lowered.fallbacks,
        notes=work.notes + lowered.notes + ([decision.note()] if has_convs else []),
        layout=decision.to_event() if has_convs else None)


def _builder(work: GraphWork) -> Backend:
    """The backend whose build runs ahead of the first launch (C++ where a graph has C++
    kernels; at most one of a graph's backends builds ahead)."""
    assert work.backend is not None
    ahead = [b for b in work.backends.values() if b.source_suffix]
    return ahead[0] if ahead else work.backend


def _buffer_json(work: GraphWork, b: Any) -> ev.Buffer:
    lay = b.layout
    out = ev.Buffer(name=b.name, kind=b.kind, size=list(lay.size), stride=list(lay.stride),
                    dtype=dtype_name(lay.dtype), device=lay.device, origins=sorted(b.origins),
                    lines=work.origin_lines(b.origins))
    out.module, out.modules = work.origin_modules(b.origins)
    if isinstance(b, ComputedBuffer) and b.data is not None:
        data = b.data
        red = data if isinstance(data, Reduction) else None
        body = describe(data)
        out.text, out.tree = body["text"], body["tree"]
        out.reads = [ev.Read(r["buffer"], r["index"]) for r in body["reads"]]
        out.ranges = list(data.ranges)
        out.reduction_ranges = list(red.reduction_ranges) if red is not None else []
        out.reduction_type = red.reduction_type if red is not None else None
        out.write_index = pexpr(lay.index(index_vars("i", len(data.ranges))))
        out.realized = b.realized
    elif isinstance(b, ExternKernel):
        out.extern = {"op": op_name(b.op), "fallback": b.fallback,
                      "args": [arg_text(a) for a in b.args]}
        call, waited = describe_collective(b), waited_buffer(b)
        if call is not None:
            out.extern["collective"] = call.as_json()
        if waited is not None:
            out.extern["waits_on"] = waited
        out.realized = "extern call" if not b.fallback else "fallback to ATen"
    elif isinstance(b, ExternOutput):
        out.extern_output = {"parent": b.parent, "item": b.item}
    return out


def schedule_stage(work: GraphWork) -> ev.SchedulingGraph:
    """Decide each matrix product (extern call or template: runtime/autotune.py), then
    fuse and order; the event carries the choices with their times."""
    assert work.lowered is not None and work.backend is not None
    templates = select_templates(work.lowered, work.backend, work.options)
    work.sched = schedule(work.lowered, work.backend, work.options.fusion, work.op_names,
                          dict(work.backends) if len(work.backends) > 1 else None,
                          first=work.first_step, combos=work.options.combo_kernels,
                          aliases=_mutation_buffers(work))
    event = schedule_json(work.sched, work.lines, work.gid, work.modules)
    kernel_of = {n.name: s.name for s in work.sched.steps if s.kind is KernelKind.TEMPLATE
                 for n in s.group.nodes}
    for t in templates:
        t.kernel = kernel_of.get(t.buffer)
    event.templates = templates
    return event


def memory_stage(work: GraphWork) -> ev.MemoryGraph:
    assert work.lowered is not None and work.sched is not None
    sched, lowered = work.sched, work.lowered
    steps = [(s.writes(), s.reads()) for s in sched.steps]
    keep = set(lowered.output_names())
    for s in sched.steps:  # ATen fallbacks may return views of their inputs: keep them
        if s.extern is not None and s.extern.fallback:
            keep |= s.reads() | set(s.writes())
    held = collective_holds([s.name for s in sched.steps], [s.extern for s in sched.steps])
    in_place = {}
    if work.backend is not None and Feature.WRITES_OVER_INPUTS in work.backend.features:
        # Never over an input a collective may still be reading.
        candidates = {o: i for o, i in _mutation_buffers(work).items() if i not in held.until}
        in_place = in_place_outputs(candidates, steps, [s.plan for s in sched.steps],
                                    sched.buffers)
    work.memory = mem = plan_memory(steps, sched.buffers, keep, sched.removed,
                                    work.options.memory_reuse, in_place, held)
    for p in mem.buffers:
        p.output = p.name in lowered.output_names()
    return ev.MemoryGraph(
        id=work.gid, steps=[s.name for s in sched.steps],
        buffers=[ev.PlannedBuffer(p.name, p.bytes, p.first, p.last, p.reused_from, p.output,
                                  p.allocated_by, p.storage) for p in mem.buffers],
        peak_bytes=mem.peak_bytes, peak_bytes_no_reuse=mem.peak_bytes_no_reuse,
        frees={str(k): v for k, v in mem.frees.items()},
        holds=[ev.HeldBuffer(h.buffer, h.collective, h.wait, h.why)  # type: ignore[arg-type]
               for h in held.holds])


def _mutation_buffers(work: GraphWork) -> dict[str, str]:
    """Output buffer -> input buffer, for graph outputs that are a mutated input's new
    value (AOTAutograd copies them back after the call)."""
    assert work.lowered is not None
    outs, ins = work.lowered.outputs, work.lowered.inputs
    found: dict[str, str] = {}
    for j, i in work.mutations.items():
        o = outs[j] if j < len(outs) else None
        if isinstance(o, Stored) and o.as_arg().is_plain() and i < len(ins):
            found.setdefault(o.buffer.name, ins[i].name)
    return found


def input_mutations() -> dict[int, int]:
    """Graph output -> graph input, for the inputs AOTAutograd's runtime copies a new
    value into (data mutations only; they are the graph's first outputs, in order)."""
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None)
    indices = getattr(meta, "mutated_inp_runtime_indices", None)
    info = getattr(meta, "input_info", None)
    bases: Any = getattr(meta, "num_intermediate_bases", 0)
    if meta is None or indices is None or info is None or bases or \
            getattr(meta, "tokens", None):
        return {}
    found: dict[int, int] = {}
    for j, i in enumerate(indices):
        if info[i].mutates_data and not info[i].mutates_metadata \
                and not info[i].requires_grad:
            found[j] = i
    return found


def codegen_stage(work: GraphWork) -> ev.CodegenGraph:
    assert work.sched is not None and work.memory is not None and work.lowered is not None
    backend = work.backend
    assert backend is not None
    if not work.backends:
        work.backends = {backend.device: backend}
    # Each kernel by the backend of the device its buffers live on.
    made: list[tuple[Backend, GeneratedKernel]] = []
    for step in work.sched.steps:
        if step.plan is not None:
            b = work.backends[step.plan.device]
            made.append((b, b.generate(step.plan, _header(work, step))))
    work.kernels = [k for _, k in made]
    builder = _builder(work)
    work.build_source = builder.build_source([k for b, k in made if b is builder])
    artifact = loader.artifact_path(work.build_source, builder, work.options)
    parts = [(b, [k for kb, k in made if kb is b], artifact if b is builder else None)
             for b in dict.fromkeys([backend, *work.backends.values()])]
    work.wrapper, work.wrapper_line_map = generate_wrapper(
        work.lowered.arg_names or [b.name for b in work.lowered.inputs], work.lowered.outputs,
        work.sched, work.memory,
        [p for p in parts if p[1] or p[0] is backend],
        input_dtypes=[dtype_name(b.dtype) for b in work.lowered.inputs])
    work.wrapper += training.output_strides_line(work)
    return ev.CodegenGraph(
        id=work.gid, backend=backend.name, backend_label=backend.label,
        emulated=backend.emulated, triton_interpret=backend.emulated,
        kernels=[ev.GeneratedKernel(k.name, b.language, k.source,
                                    _with_lines(work, k.line_map), b.label,
                                    *work.origin_modules(_kernel_origins(work, k.name)))
                 for b, k in made],
        wrapper=ev.Wrapper(work.wrapper, [ev.WrapperLine(**e) for e in work.wrapper_line_map]))


def _kernel_origins(work: GraphWork, name: str) -> set[str]:
    assert work.sched is not None
    return {o for step in work.sched.steps if step.name == name
            for n in step.group.nodes for o in n.buffer.origins}


def _header(work: GraphWork, step: Any) -> list[str]:
    plan = step.plan
    shape = f"{plan.xnumel} rows x {plan.rnumel}" if plan.kind.reduces else \
        f"{plan.xnumel} elements"
    if plan.kind is KernelKind.TEMPLATE:
        tem = plan.nodes[0].buffer
        shape = f"{tem.summary}; {tem.choice_reason}"
    if plan.kind is KernelKind.COMBO:
        shape = f"{len(plan.parts)} independent pointwise kernels, {plan.xnumel} elements " \
            "in all, launched as one"
    return [f"{plan.name}: {plan.kind}, {shape}",
            f"buffers: {', '.join(n.name for n in plan.nodes)}"
            + (f" (stored: {', '.join(plan.stores)})" if plan.stores else ""),
            "fuses: " + work.describe_origins(plan.origins)]


def _with_lines(work: GraphWork, line_map: list[dict[str, Any]]) -> list[ev.KernelLine]:
    return [ev.KernelLine(**e, lines=work.origin_lines(e["origins"])) for e in line_map]


def build_library(work: GraphWork) -> BuildResult:
    """The graph's build ahead of its first launch (its C++ library), alone: graphs' builds
    may run at once (the pipeline's compile stage), then `build_stage` loads each."""
    return loader.build_ahead(work.build_source, _builder(work), work.options)


def build_stage(work: GraphWork, warmup: bool = True, built: BuildResult | None = None
                ) -> ev.CompileGraph:
    assert work.backend is not None and work.lowered is not None
    work.compiled = compiled = loader.load_graph(
        work.wrapper, work.build_source, work.backend, work.options,
        [k.name for k in work.kernels], work.lowered.constants, builder=_builder(work),
        built=built)
    _record(work, compiled)
    prebuilt = _prebuild(work, compiled)
    kernels = []
    if warmup:
        kernels = [ev.BuiltKernel(**k) for k in loader.warmup(compiled, work.example_inputs)]
    return ev.CompileGraph(id=work.gid, ms=compiled.ms, cache_hit=compiled.cache_hit,
                           kernels=kernels, path=str(compiled.path),
                           build_ms=compiled.build_ms, graph_cache=compiled.graph_cache,
                           prebuild=prebuilt)


def _prebuild(work: GraphWork, compiled: loader.CompiledGraph) -> dict[str, Any]:
    """The backend builds the graph's kernels ahead of the first launch, in parallel
    (codegen/triton/pool.py); empty where nothing builds at a launch."""
    assert work.sched is not None
    dtypes = {name: buf.dtype for name, buf in work.sched.buffers.items()}
    with compiled.backend.first_launch(compiled.path, None):
        return compiled.backend.prebuild(compiled.module, work.kernels_of(compiled.backend),
                                         dtypes, work.options.compile_workers)


def _graph_key(work: GraphWork) -> str | None:
    """The whole-graph cache's key for this graph (None, with the reason in
    `work.graph_cache`, when the graph cannot be cached)."""
    backend = work.backend or choose_backend(
        work.options.backend, graph_device(work.example_inputs, work.gm), work.options)
    key, why = graph_cache.graph_key(
        work.gm, work.example_inputs, work.options,
        {"lines": work.lines, "code": work.code_lines,
         "mutations": sorted(work.mutations.items()), "kind": work.kind,
         "free_outputs": sorted(work.free_outputs)},
        backend.cache_identity())
    if key is None:
        work.graph_cache = graph_cache.GraphCacheStatus(None, "bypass", why)
    return key


def _record(work: GraphWork, compiled: loader.CompiledGraph) -> None:
    """Say what the whole-graph cache held for this graph, and store what was built.

    An entry that names another wrapper than the one just generated means the key missed
    something that changes the code: it is reported as "stale" (and replaced)."""
    status = work.graph_cache
    key, backend, lowered = _graph_key(work), work.backend, work.lowered
    if len(set(work.backends.values())) > 1:  # an entry names one backend to rebuild
        key, status = None, graph_cache.GraphCacheStatus(
            None, "bypass", "kernels of more than one backend (a mixed-device graph)")
    if key is not None and backend is not None and lowered is not None:
        entry, why = graph_cache.lookup(key, work.options)
        if why or (entry is not None and entry.wrapper != compiled.path):
            status = graph_cache.GraphCacheStatus(key, "stale", why or "another wrapper")
        elif status is None or status.status != "stale":
            status = graph_cache.GraphCacheStatus(key, "hit" if entry else "miss")
        constants = [b.name for b in lowered.inputs[len(lowered.inputs)
                                                    - len(lowered.constants):]]
        graph_cache.store(key, work.options, graph_cache.Entry(
            backend.name, backend.device, compiled.path,
            loader.source_path(work.build_source, backend, work.options), compiled.kernels,
            constants), loader.artifact_path(work.build_source, backend, work.options))
    compiled.graph_cache = status.to_json() if status is not None else {}


def _cached(work: GraphWork) -> loader.CompiledGraph | None:
    """The graph as compiled before, from the whole-graph cache, or None (then compile it;
    `work.graph_cache` says why when an entry was there and did not verify)."""
    key = _graph_key(work)
    if key is None:
        return None
    entry, why = graph_cache.lookup(key, work.options)
    if entry is None:
        if why:
            work.graph_cache = graph_cache.GraphCacheStatus(key, "stale", why)
        return None
    return _load_entry(key, entry, work.options,
                       graph_cache.constant_values(work.gm, entry.constants))


def _load_entry(key: str, entry: graph_cache.Entry, options: CompileOptions,
                constants: Sequence[Any], reason: str = "") -> loader.CompiledGraph:
    backend = choose_backend(entry.backend, entry.device, options)
    compiled = loader.load_built(entry.wrapper, entry.source, backend, entry.kernels,
                                 constants)
    compiled.graph_cache = graph_cache.GraphCacheStatus(key, "hit", reason).to_json()
    return compiled


def _warm(dynamo_key: str | None, options: CompileOptions) -> loader.CompiledGraph | None:
    """A Dynamo graph compiled before to one ATen graph with nothing of AOTAutograd's
    runtime around it (compiler/dynamo_cache.py): that graph, from its cache entry."""
    key = graph_cache.linked(dynamo_key, options) if dynamo_key is not None else None
    entry = graph_cache.lookup(key, options)[0] if key is not None else None
    if key is None or entry is None or entry.constants:
        return None
    return _load_entry(key, entry, options, (), "a known Dynamo graph: AOTAutograd skipped")


def compile_fx(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
               options: CompileOptions, filename: str | None = None, gid: int = 0,
               notes: Sequence[str] = (), mutations: dict[int, int] | None = None,
               kind: str | None = None,
               trace: GraphTrace | None = None,
               free_outputs: frozenset[int] = frozenset()) -> loader.CompiledGraph:
    """Everything at once: the backend's path. Returns fn(*args) -> list of outputs.

    A graph compiled before comes from the whole-graph cache (runtime/graph_cache.py)
    without lowering..codegen; the CompiledGraph's `graph_cache` says which happened.
    With `trace` (a trace directory: compiler/trace/writer.py) every stage runs, and `trace`
    gets the work, each stage's payload and how long each stage took (ms)."""
    work = GraphWork(gid, gm, list(example_inputs), options, filename, kind=kind,
                     free_outputs=free_outputs)
    work.notes.extend(notes)
    work.mutations = dict(mutations or {})
    # folded before the whole-graph cache's key: an entry names the folded constants
    work.notes.extend(fold_constants(gm, graph_device(work.example_inputs, gm)))
    cached = _cached(work) if trace is None else None
    if cached is not None:
        return cached
    stages: tuple[tuple[str, Callable[[GraphWork], Any]], ...] = (
        ("lowering", lower), ("scheduling", _numbered(trace)), ("memory", memory_stage),
        ("codegen", codegen_stage), ("compile", functools.partial(build_stage, warmup=False)))
    payloads: dict[str, Any] = {}
    ms: dict[str, float] = {}
    for name, run_stage in stages:
        start = time.perf_counter()
        payloads[name] = run_stage(work)
        ms[name] = (time.perf_counter() - start) * 1000
    if trace is not None:
        trace(work, payloads, ms)
    assert work.compiled is not None
    return work.compiled


class GraphTrace(Protocol):
    """A trace directory's recorder of one graph (compiler/trace/writer.py)."""

    def __call__(self, work: GraphWork, payloads: dict[str, Any], ms: dict[str, float]
                 ) -> Any:
        """Write the graph's file, once every stage has run."""

    def numbers(self) -> contextlib.AbstractContextManager[KernelNumbers]:
        """The trace's kernel numbers, held while the graph is scheduled."""


def _numbered(trace: GraphTrace | None) -> Callable[[GraphWork], ev.SchedulingGraph]:
    """Scheduling, the kernels numbered on from the trace's earlier graphs (a trace
    directory's; without one the graph is a trace of its own)."""
    def stage(work: GraphWork) -> ev.SchedulingGraph:
        with trace.numbers() if trace is not None else \
                contextlib.nullcontext(KernelNumbers()) as numbers:
            return numbers.schedule(work, schedule_stage)

    return stage


def _is_dynamic(example_inputs: Sequence[Any]) -> bool:
    for t in example_inputs:
        if isinstance(t, torch.SymInt):
            return True
        if isinstance(t, torch.Tensor) and any(isinstance(s, torch.SymInt)
                                               for s in (*t.shape, *t.stride())):
            return True
    return False


def _specialising(gm: torch.fx.GraphModule, options: CompileOptions, filename: str | None,
                  gid: int, kind: str | None,
                  trace: GraphTrace | None = None
                  ) -> Callable[..., Any]:
    """A graph with symbolic sizes, compiled once per concrete shape it is called with.

    Lowering needs integer sizes, so each new set of input shapes (and int arguments)
    retraces the ATen graph with them (make_fx over fake copies: the sizes become
    constants) and compiles that; the note says so in the graph's `lowering` event."""
    from torch.fx.experimental.proxy_tensor import make_fx

    cache: dict[Any, Callable[..., Any]] = {}

    @torch._disable_dynamo  # type: ignore[misc]
    def run(*args: Any) -> Any:
        key = tuple((tuple(a.shape), tuple(a.stride()), a.dtype, a.device.type)
                    if isinstance(a, torch.Tensor) else a for a in args)
        pos = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        tensors = [args[i] for i in pos]
        fn = cache.get(key)
        if fn is None:
            def with_sizes(*ts: Any) -> Any:
                full = list(args)
                for i, t in zip(pos, ts):
                    full[i] = t
                # Node by node, so each new node keeps its source node's meta (its user
                # line, its module): the lines of a specialised graph are the graph's own.
                return torch.fx.Interpreter(gm).run(*full)

            with torch.fx.traceback.preserve_node_meta():
                concrete = make_fx(with_sizes, tracing_mode="fake")(*tensors)
            sizes = ", ".join(str(list(a.shape)) if isinstance(a, torch.Tensor) else repr(a)
                              for a in args)
            note = f"dynamic shapes: specialised to the sizes of this call ({sizes})"
            try:
                fn = compile_fx(concrete, tensors, options, filename, gid, notes=[note],
                                kind=kind, trace=trace)
            except Unsupported as e:
                warnings.warn(f"kernelscope: running graph {gid} eagerly: {e}", stacklevel=2)
                fn = _eager(concrete)
            cache[key] = fn
        return fn(*tensors)

    return run


def _eager(gm: torch.fx.GraphModule) -> Callable[..., Any]:
    traced = training.traced_strides(gm)

    def run_eagerly(*args: Any) -> Any:  # inputs as traced: a backward may get NHWC ones
        return gm.forward(*training.as_traced(args, traced))

    return run_eagerly


def _compiled_runner(gm: torch.fx.GraphModule, compiled: Any, kind: str,
                     options: CompileOptions, dynamo: tuple[str, int] | None,
                     pair: GraphPair | None = None) -> Any:
    """What AOTAutograd calls for a compiled graph: the wrapper (under CUDA graphs where
    asked), boxed; the graph's cache entry linked to its Dynamo graph where the Dynamo
    graph's runtime does nothing of its own (a later compile may skip AOTAutograd)."""
    key = compiled.graph_cache.get("key")
    if dynamo is not None and key and not compiled.constants and \
            not dynamo_cache.identity_runtime(gm, dynamo[1]):
        graph_cache.link(dynamo[0], key, options)
    run: Callable[..., Any] = compiled
    if options.cuda_graphs and getattr(compiled, "backend", None) is not None \
            and is_gpu(compiled.backend.device):
        run = CudaGraphed(compiled, static_input_indices(), list(input_mutations().values()),
                          pair if kind in ("forward", "backward") else None, kind)
    # Run the wrapper (ctypes calls on data pointers) as plain Python, never traced: a
    # backward graph runs inside `loss.backward()`, where Dynamo may be watching. A forward
    # runs inside AOTAutograd's disabled runtime wrapper (a second disable costs us/call).
    return make_boxed_func(run if kind != "backward" else torch._disable_dynamo(run))


def _graph_pair(pairs: weakref.WeakKeyDictionary[Any, GraphPair], kind: str
                ) -> GraphPair | None:
    """A forward's new pair, or the pair of the forward a backward belongs to."""
    ctx = torch._guards.TracingContext.try_get()
    if ctx is None:
        return None
    if kind == "forward":
        pairs[ctx] = GraphPair()
    return pairs.get(ctx)


def _aot_compilers(compile_aten: Callable[..., Any], dynamo: tuple[str, int] | None,
                   info: Any) -> dict[str, Any]:
    """AOTAutograd's three compilers, each `compile_aten` told which it is."""
    return {"fw_compiler": functools.partial(compile_aten, kind="forward", dynamo=dynamo,
                                             info=info),
            "bw_compiler": functools.partial(compile_aten, kind="backward", info=info),
            "inference_compiler": functools.partial(compile_aten, kind="inference",
                                                    dynamo=dynamo, info=info)}


def make_backend(options: CompileOptions, filename: str | None = None,
                 sink: list[Any] | None = None
                 ) -> Callable[[torch.fx.GraphModule, list[Any]], Any]:
    """A torch.compile backend that compiles every ATen graph with Kernelscope.

    `sink`, if given, collects each CompiledGraph (the profiler times their kernels).
    """
    counter = [0]
    # One forward and its backward share CUDA graph memory (runtime/graphs.py): the
    # backward is compiled later, under the forward's tracing context.
    pairs: weakref.WeakKeyDictionary[Any, GraphPair] = weakref.WeakKeyDictionary()
    tracer = TraceDir.open(options.trace_dir, options.to_json()) if options.trace_dir else None

    # The backward graph is compiled lazily, inside `loss.backward()`; when that call sits in
    # a torch.compile'd function Dynamo is still watching frames, and would trace our own
    # compiler (sympy included) as user code. Compiling is never user code.
    @torch._disable_dynamo  # type: ignore[misc]
    def compile_aten(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], kind: str,
                     dynamo: tuple[str, int] | None = None, info: Any = None) -> Any:
        """`kind`: which of AOTAutograd's compilers this is (forward, backward or
        inference). `dynamo`: the Dynamo graph's key and input count, when a later compile
        of it may skip AOTAutograd if this graph shows that its runtime does nothing."""
        gid = counter[0]
        counter[0] += 1
        trace = tracer.recorder(info, kind) if tracer is not None else None
        if _is_dynamic(example_inputs):
            return make_boxed_func(_specialising(gm, options, filename, gid, kind, trace))
        try:
            compiled = compile_fx(gm, example_inputs, options, filename, gid,
                                  mutations=input_mutations(), kind=kind, trace=trace,
                                  free_outputs=training.saved_outputs(gm) if kind == "forward"
                                  else frozenset())
        except Unsupported as e:
            warnings.warn(f"kernelscope: running graph {gid} eagerly: {e}", stacklevel=2)
            return make_boxed_func(torch._disable_dynamo(_eager(gm)))
        training.report_output_strides(compiled)
        if sink is not None:
            sink.append(compiled)
        return _compiled_runner(gm, compiled, kind, options, dynamo,
                                _graph_pair(pairs, kind) if options.cuda_graphs else None)

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if options.attention_to_sdpa:
            rewrite_attention(gm)  # CUDA graphs only; recorded in gm.meta
        key, _ = dynamo_cache.dynamo_key(gm, example_inputs, options)
        info = tracer.dynamo(gm) if tracer is not None else None
        warm = _warm(key, options) if tracer is None else None
        if warm is not None:
            if sink is not None:
                sink.append(warm)
            return torch._disable_dynamo(warm)
        dynamo = None if key is None else (key, len(example_inputs))
        return through_aot(gm, example_inputs, options.partition,
                           **_aot_compilers(compile_aten, dynamo, info))

    return backend
