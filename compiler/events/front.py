"""The payloads of the front half's stages: `source` and `capture` (and `capture_graph`).

Part of the typed event model: compiler/events/types.py gathers every stage's payload."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kernelscope.compiler.events.kinds import GraphKind, Origin


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
    split: GraphSplit | None = None  # why Dynamo's graph was split here (a DDP bucket)


@dataclass
class GraphSplit:
    """A graph one piece of a Dynamo graph that a backend wrapper cut, not a graph break:
    DDPOptimizer ends a graph at each DDP gradient bucket (compiler/capture/ddp_split.py)."""

    by: str
    index: int  # this piece, in forward order
    count: int  # pieces the Dynamo graph was cut into
    bucket_bytes: int
    bucket_cap: int
    params: list[str]
    reason: str


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
class SnippetCall:
    """One of the snippet's calls of its compiled function, and what Dynamo ran for it:
    the frame compiles it caused (`compiled`), else the earlier compiles whose graphs ran
    for it (their guards held)."""

    call: int
    compile_ids: list[str]  # what it compiled, else the compiles it reused
    compiled: bool
    inputs: list[CallInput] = field(default_factory=list)
    grad_mode: bool = True
    failed: list[str] = field(default_factory=list)  # compiles whose guards it failed, where
    # Dynamo reported them (a call that compiled again)


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
    # Read from a TORCH_TRACE log (compiler/trace/torch_trace.py): its compile-time
    # metrics, cache hits and misses, and every other record of this compile, an unknown
    # one with its payload.
    metrics: dict[str, Any] = field(default_factory=dict)
    cache: list[str] = field(default_factory=list)
    records: list[LoggedRecord] = field(default_factory=list)


@dataclass
class LoggedRecord:
    """A record of a TORCH_TRACE log this reader lists but does not show as a stage."""

    name: str
    known: bool
    chars: int
    payload: str = ""  # an unknown record's text (cut), so nothing is dropped unseen


@dataclass
class LogInfo:
    """Where a trace opened from a TORCH_TRACE log came from, and what such a log does not
    hold (each stage named, never filled in)."""

    format: str  # "TORCH_TRACE"
    file: str
    records: int
    torch: str
    absent: list[str]
    counted: dict[str, int] = field(default_factory=dict)  # timing events, tensor records
    unknown: list[LoggedRecord] = field(default_factory=list)  # records of no compile
    skipped_lines: int = 0
    rebuild: list[Rebuildable] = field(default_factory=list)  # one per graph, in order


@dataclass
class Rebuildable:
    """Whether Kernelscope can rebuild a logged graph and compile it (compiler/trace/
    rebuild.py): `why_not` None, or the reason it cannot."""

    graph: int
    why_not: str | None = None


@dataclass
class Capture:
    graphs: list[CaptureGraph]
    graph_breaks: list[GraphBreak]
    dynamo_graphs: int
    stdout: str = ""
    origin: Origin = "snippet"
    compiles: list[DynamoCompile] = field(default_factory=list)
    calls: list[SnippetCall] = field(default_factory=list)  # every replayed call, in order
    log: LogInfo | None = None  # a trace opened from a TORCH_TRACE log
