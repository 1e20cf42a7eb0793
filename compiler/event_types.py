"""The typed model of every stage's payload (compiler/event_schema.py makes the JSON
Schema from it).

No torch here: the server and the tests import it without the compiler. docs/events.md
explains each field; this module says which fields there are and what type each has.
A field without a default is required; a field with one may be absent. Every object
allows further keys (a stage may grow), but the listed ones must have the listed types.

    python -m kernelscope.compiler.event_schema            # print the schema
    python -m kernelscope.compiler.event_schema --write    # rewrite docs/events.schema.json
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from kernelscope.compiler.events import FOLLOW_UPS, PARTS, STAGES, TERMINAL

GraphKind = Literal["forward", "backward", "inference"]
ErrorKind = Literal["syntax", "entry", "exception", "unsupported", "bundle", "build",
                    "mismatch", "timeout", "memory", "killed", "sandbox", "busy",
                    "cancelled"]
Origin = Literal["snippet"]
# Who sent an event, as the server labels it at the event's top level (docs/server.md): the
# process that ran the snippet, our own compiler process, or the server itself.
EventOrigin = Literal["snippet", "compiler", "server"]


# -- source --------------------------------------------------------------------------------
@dataclass
class InputSpec:
    name: str
    shape: list[int] = field(default_factory=list)
    stride: list[int] = field(default_factory=list)
    dtype: str = ""
    device: str = ""
    value: str = ""  # a non-tensor input, as repr


@dataclass
class Versions:
    python: str
    torch: str
    triton: str | None
    gpu: str | None
    kernelscope: str


@dataclass
class Source:
    code: str
    filename: str
    entry: str
    entry_line: int | None
    inputs: list[InputSpec]
    device: str
    backend: str
    triton_interpret: bool
    options: dict[str, Any]
    versions: Versions
    backend_label: str = ""
    emulated: bool = False
    stdout: str = ""
    origin: Origin = "snippet"


# -- capture -------------------------------------------------------------------------------
@dataclass
class FxNode:
    name: str
    op: Literal["placeholder", "call_function", "get_attr", "output"]
    target: str
    args: list[Any]
    line: int | None
    source: str | None = None
    shape: Any = None  # list of ints, or one list per tensor of a tuple value
    stride: Any = None
    dtype: Any = None
    # The innermost nn.Module the node ran in, as an attribute path from the compiled
    # module ("blocks.1.attn"); None outside any module call (compiler/capture/modules.py).
    module: str | None = None


@dataclass
class ModuleInfo:
    """One module of a captured graph: its path and class (ancestors listed too)."""

    path: str
    type: str


@dataclass
class CaptureGraph:
    id: int
    name: str
    code: str
    nodes: list[FxNode]
    edges: list[list[str]]
    kind: GraphKind
    dynamo_graph: int
    compile_id: str | None = None  # Dynamo's frame compile that made it ("0/1")
    modules: list[ModuleInfo] = field(default_factory=list)  # every node's module, first seen


@dataclass
class GraphBreak:
    reason: str
    line: int | None


@dataclass
class Guard:
    """One check Dynamo runs before it reuses a compiled frame, in words."""

    kind: str
    text: str
    line: int | None = None


@dataclass
class CallInput:
    shape: list[int] = field(default_factory=list)
    dtype: str = ""
    device: str = ""
    requires_grad: bool = False
    value: str = ""  # a non-tensor argument, as repr


@dataclass
class DynamoCompile:
    """One Dynamo frame compile of the snippet's calls (compiler/capture/guards.py)."""

    compile_id: str | None
    call: int
    recompile: bool
    reasons: list[str]
    function: str = ""
    line: int | None = None
    inputs: list[CallInput] = field(default_factory=list)
    grad_mode: bool = True
    guards: list[Guard] = field(default_factory=list)
    hidden_guards: int = 0
    raw: str = ""
    error: str = ""


@dataclass
class Capture:
    graphs: list[CaptureGraph]
    graph_breaks: list[GraphBreak]
    dynamo_graphs: int
    stdout: str = ""
    origin: Origin = "snippet"
    compiles: list[DynamoCompile] = field(default_factory=list)


# -- lowering ------------------------------------------------------------------------------
@dataclass
class Read:
    buffer: str
    index: str


@dataclass
class Buffer:
    name: str
    kind: str  # pointwise, reduction, extern, view, ...
    size: list[int]
    stride: list[int]
    dtype: str
    device: str
    origins: list[str]
    lines: list[int]
    realized: str = ""
    module: str | None = None  # the common prefix of its origin nodes' modules
    modules: list[str] = field(default_factory=list)  # their modules, sorted
    text: str = ""
    tree: Any = None
    reads: list[Read] = field(default_factory=list)
    ranges: list[int] = field(default_factory=list)
    reduction_ranges: list[int] = field(default_factory=list)
    reduction_type: str | None = None
    write_index: str = ""
    extern: dict[str, Any] = field(default_factory=dict)
    extern_output: dict[str, Any] = field(default_factory=dict)


@dataclass
class LoweringInput:
    name: str
    size: list[int]
    stride: list[int]
    dtype: str


@dataclass
class Fallback:
    op: str
    node: str
    buffer: str
    reason: str
    line: int | None


@dataclass
class LayoutChoice:
    """The whole-graph layout of a graph with convolutions (compiler/lowering/layout.py)."""

    layout: Literal["channels_last", "contiguous"]
    reason: str
    convolutions: list[str] = field(default_factory=list)  # FX convolutions considered
    nodes: list[str] = field(default_factory=list)  # FX nodes whose 4-D values go NHWC


@dataclass
class LoweringGraph:
    id: int
    buffers: list[Buffer]
    inputs: list[LoweringInput]
    outputs: list[str]
    fallbacks: list[Fallback]
    # Facts about the graph as compiled: random ops (not bit-comparable with eager), a
    # dynamic-shape graph specialised to the sizes of a call, ...
    notes: list[str] = field(default_factory=list)
    layout: LayoutChoice | None = None  # graphs with convolutions only


@dataclass
class Lowering:
    graphs: list[LoweringGraph]


# -- scheduling ----------------------------------------------------------------------------
@dataclass
class ScheduledKernel:
    name: str
    kind: str
    buffers: list[str]
    numel: int
    rnumel: int
    origins: list[str]
    lines: list[int]
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    module: str | None = None  # the common prefix of the fused nodes' modules
    modules: list[str] = field(default_factory=list)  # their modules, sorted


@dataclass
class FusionDecision:
    node1: str
    node2: str
    fused: bool
    kind: str
    reason: str
    score: int


@dataclass
class TemplateChoice:
    """One way to compute a matrix product: the extern call or a template config."""

    name: str  # "extern" or the config's name ("128x128x32_g8_s3_w4")
    ms: float | None = None  # measured on the real shapes (None: not measured)
    config: dict[str, int] = field(default_factory=dict)
    error: str | None = None  # why this choice was dropped (build failure, wrong values)


@dataclass
class TemplateSelection:
    """What a product (a MatmulTemplate buffer) runs as, and why."""

    buffer: str
    summary: str  # "mm 512x768 @ 768x3072 float16"
    origins: list[str]
    chosen: str  # a choice's name
    reason: str
    choices: list[TemplateChoice] = field(default_factory=list)
    cache_hit: bool = False  # the measurement came from the on-disk autotune cache
    kernel: str | None = None  # the template kernel it became, with the epilogue fused


@dataclass
class SchedulingGraph:
    id: int
    kernels: list[ScheduledKernel]
    decisions: list[FusionDecision]
    removed_buffers: list[str]
    templates: list[TemplateSelection] = field(default_factory=list)


@dataclass
class Scheduling:
    graphs: list[SchedulingGraph]


# -- memory --------------------------------------------------------------------------------
@dataclass
class PlannedBuffer:
    name: str
    bytes: int
    first: int
    last: int
    reused_from: str | None
    output: bool
    allocated_by: str = "wrapper"
    storage: str = ""  # the buffer whose allocation it ends up using (an input, in place)


@dataclass
class MemoryGraph:
    id: int
    steps: list[str]
    buffers: list[PlannedBuffer]
    peak_bytes: int
    peak_bytes_no_reuse: int
    frees: dict[str, list[str]] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    saved: list[SavedActivation] = field(default_factory=list)


@dataclass
class SavedActivation:
    """A forward graph's value kept for the backward graph (training)."""

    node: str
    buffer: str | None = None  # None: a graph input, no new memory
    bytes: int | None = None
    backward_input: str = ""


@dataclass
class Memory:
    graphs: list[MemoryGraph]


# -- codegen -------------------------------------------------------------------------------
@dataclass
class KernelLine:
    line: int
    origins: list[str]
    lines: list[int]
    buffers: list[str] = field(default_factory=list)


@dataclass
class GeneratedKernel:
    name: str
    language: str
    source: str
    line_map: list[KernelLine]
    target: str = ""
    module: str | None = None  # as the scheduled kernel's
    modules: list[str] = field(default_factory=list)


@dataclass
class WrapperLine:
    line: int
    kernel: str | None = None


@dataclass
class Wrapper:
    source: str
    line_map: list[WrapperLine]


@dataclass
class CodegenGraph:
    id: int
    backend: str
    kernels: list[GeneratedKernel]
    wrapper: Wrapper
    backend_label: str = ""
    emulated: bool = False
    triton_interpret: bool = False


@dataclass
class Codegen:
    graphs: list[CodegenGraph]


# -- compile -------------------------------------------------------------------------------
@dataclass
class StageLines:
    """Lines first..last (1-based, inclusive) of one lower stage's text, all made from
    the same lines of the kernel's source (its debug locations)."""

    first: int
    last: int
    kernel_lines: list[int]


@dataclass
class BuiltKernel:
    name: str
    ms: float | None
    cache_hit: bool = False
    registers: int | None = None
    spills: int | None = None
    shared_bytes: int | None = None
    num_warps: int | None = None
    num_stages: int | None = None
    # the backend's lower stages: Triton's ttir/ttgir/llir/ptx/sass on a GPU, C++'s asm
    ir: dict[str, str] | None = None
    line_maps: dict[str, list[StageLines]] | None = None  # stage -> its mapped lines
    # the GPU target the stages were compiled for offline, never run here (a CPU host
    # whose interpreter ran the kernel); None: the build that ran
    gpu_target: str | None = None
    stages_note: str | None = None  # why a kernel has no lower stages


@dataclass
class CompileGraph:
    id: int
    ms: float
    cache_hit: bool
    kernels: list[BuiltKernel]
    path: str = ""
    build_ms: float = 0.0
    # the whole-graph cache (compiler/runtime/graph_cache.py): key, status (hit, miss,
    # stale, bypass) and why; empty when it was not asked
    graph_cache: dict[str, Any] = field(default_factory=dict)
    # the kernels built ahead of the first launch in the compile pool (triton_pool.py):
    # workers, kernels, ms, built_ms per kernel, errors; empty where nothing was
    prebuild: dict[str, Any] = field(default_factory=dict)


@dataclass
class Compile:
    graphs: list[CompileGraph]


# -- run -----------------------------------------------------------------------------------
@dataclass
class OutputCheck:
    index: int
    ok: bool
    shape: list[int] = field(default_factory=list)
    dtype: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatched: int = 0
    graph: int = 0
    error: str = ""
    value: str = ""
    atol: float = 0.0  # the tolerance this output was compared at (its dtype's)
    rtol: float = 0.0


@dataclass
class RunGraph:
    id: int
    ok: bool
    outputs: list[OutputCheck]
    reference: str = ""


@dataclass
class ChainedCheck:
    """Training: a backward graph run on the activations its compiled forward saved."""

    forward: int
    backward: int
    ok: bool
    outputs: list[OutputCheck]


@dataclass
class Run:
    ok: bool
    outputs: list[OutputCheck]
    atol: float
    rtol: float
    graphs: list[RunGraph] = field(default_factory=list)
    reference: str = ""
    chained: list[ChainedCheck] = field(default_factory=list)


# -- profile -------------------------------------------------------------------------------
@dataclass
class KernelTime:
    name: str
    ms: float | None
    bytes: int = 0
    gbps: float | None = None
    pct_peak: float | None = None


@dataclass
class Profile:
    measured: bool
    reason: str | None = None
    device: str = ""
    eager_ms: float | None = None
    kernelscope_ms: float | None = None
    inductor_ms: float | None = None
    peak_gbps: float | None = None
    kernels: list[KernelTime] = field(default_factory=list)
    # Older traces only: Inductor's time and code now come in the `inductor` event.
    inductor: InductorOutput | None = None


@dataclass
class InductorKernel:
    name: str
    language: str
    source: str
    ms: float | None = None  # its median time per launch (the `inductor` event; None: untimed)


@dataclass
class InductorOutput:
    """TorchInductor's own output code for the same graphs (compiler/runtime/inductor.py)."""

    code: list[str]
    kernels: list[InductorKernel]
    error: str | None = None


# -- inductor (after profile, only with the `inductor` option) ----------------------------
@dataclass
class Inductor:
    """TorchInductor on the same graphs, after our own result (compiler/runtime/inductor.py):
    its output code and kernels, and, where timed, its time per call and per kernel."""

    measured: bool
    code: list[str]
    kernels: list[InductorKernel]
    error: str | None = None
    reason: str | None = None  # why nothing was timed
    device: str = ""
    inductor_ms: float | None = None


# -- error, done ---------------------------------------------------------------------------
@dataclass
class Error:
    stage: str
    kind: ErrorKind
    message: str
    line: int | None = None
    traceback: str | None = None
    kernel: str | None = None
    log: str | None = None


@dataclass
class Done:
    """ok: every stage ran and `run` found no output that differs from eager."""

    ok: bool
    isolated: bool = False
    trace_id: str | None = None  # the permalink's id, once the server stored the trace


@dataclass
class JobDone(Done):
    """`done` as a reader sees it (ok: every stage ran and `run` found no output that
    differs from eager): the compiler's Done, plus what the server adds when it closes a
    job (server/worker.py `finish`); the compiler never sets these."""

    wall_ms: float | None = None  # from the request to `done`: what the user waited
    stages_ms: float | None = None  # the sum of the stage times the compiler reported
    snippet_stdout: str | None = None  # the tail of what the snippet wrote to fd 1
    store_error: str | None = None  # why the trace has no permalink
    # Stages that run after `done` (the Inductor comparison): each is appended to the
    # stored trace when it ends, by `follow_ups_until` (Unix seconds) at the latest
    # (server/followups.py; docs/server.md, "Follow-ups").
    follow_ups: list[str] | None = None
    follow_ups_until: float | None = None


def to_json(value: Any) -> Any:
    """A payload as JSON-ready data: a dataclass of this module becomes an object of all
    its fields (so every listed key is present), lists and dicts recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


PAYLOADS: dict[str, type] = {
    "source": Source, "capture": Capture, "lowering": Lowering, "scheduling": Scheduling,
    "memory": Memory, "codegen": Codegen, "compile": Compile, "run": Run,
    "profile": Profile, "capture_graph": CaptureGraph, "inductor": Inductor,
    "error": Error, "done": JobDone,
}
assert tuple(PAYLOADS) == STAGES + PARTS + FOLLOW_UPS + TERMINAL
