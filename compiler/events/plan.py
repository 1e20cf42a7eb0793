"""The payloads of the planning stages: `lowering`, `scheduling` and `memory`.

Part of the typed event model: compiler/events/types.py gathers every stage's payload."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


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
class ComboPart:
    """One part of a combo kernel (kind "combo"): the pointwise kernel it would have been
    alone, launched with the others as one kernel (schedule/horizontal.py)."""

    name: str
    buffers: list[str]
    numel: int


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
    parts: list[ComboPart] = field(default_factory=list)  # a combo kernel's parts, in order


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
class HeldBuffer:
    """A buffer a functional collective holds until its wait_tensor: its input (the
    collective may still read it) or its result (the collective writes it)."""

    buffer: str
    collective: str  # the step that starts the collective
    wait: str  # the step that waits on it ("" if the graph never does)
    why: Literal["input", "result"]


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
    holds: list[HeldBuffer] = field(default_factory=list)


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
