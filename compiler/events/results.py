"""The payloads of the result stages and the stream's end: `run`, `profile`, `inductor`,
`error` and `done`.

Part of the typed event model: compiler/events/types.py gathers every stage's payload."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kernelscope.compiler.compare.match import Group
from kernelscope.compiler.events.kinds import ErrorKind


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
class CudaGraphStatus:
    """A graph run under CUDA graphs (the cuda_graphs option, runtime/graphs.py): whether
    it was recorded and replays, and why the calls that did not replay ran plainly."""

    recorded: bool
    replays: int
    why_not: str | None = None  # why it is never recorded (None: it is, or may be)
    plain_runs: dict[str, int] = field(default_factory=dict)  # reason -> calls


@dataclass
class RunGraph:
    id: int
    ok: bool
    outputs: list[OutputCheck]
    reference: str = ""
    cuda_graph: CudaGraphStatus | None = None  # with cuda_graphs on a GPU: how it replays


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
class Spread:
    """A measured time (compiler/runtime/stats.py): the median of `repeats` repeats, each
    the median of a batch of calls; p10..p90 over the repeats. `noisy`: p90/p10 above 1.5,
    shown as its range, never as one number."""

    ms: float | None
    p10: float | None = None
    p90: float | None = None
    repeats: int = 0
    noisy: bool = False


@dataclass
class KernelTime:
    name: str
    ms: float | None
    bytes: int = 0
    gbps: float | None = None
    pct_peak: float | None = None
    time: Spread | None = None  # ms with its spread (older traces: ms only)
    graph: int = 0


RowKind = Literal["kernel", "extern", "wrapper", "op", "host", "device_idle", "unaccounted"]


@dataclass
class ProfileRow:
    """One row of a call's time (compiler/profiling.py): a generated kernel, an extern call
    (op, shapes, library), the wrapper's own host time, an eager ATen op, eager's Python
    between ops, or the "unaccounted" rest, which never counts as covered."""

    name: str
    kind: RowKind
    time: Spread
    graph: int = 0
    graph_kind: str | None = None  # forward, backward, inference
    op: str = ""  # extern or eager op: the ATen op
    shapes: list[list[int]] = field(default_factory=list)  # its tensor arguments' shapes
    library: str = ""  # who runs it: generated (C++/Triton), cuBLAS, cuDNN, oneDNN, MKL, ATen
    module: str | None = None  # the common module path of its FX nodes
    origins: list[str] = field(default_factory=list)  # FX nodes
    covered: bool = True
    pct: float | None = None  # of the call timed without timers


@dataclass
class Rollup:
    """Rows added up by module path or by graph: "blocks.3.attn: 0.81 ms, 17%"."""

    key: str
    by: Literal["module", "graph", "graph_kind"]
    ms: float
    pct: float | None
    rows: int


@dataclass
class TimelineItem:
    """One segment of one timed call, for the Chrome/Perfetto trace export."""

    graph: int
    name: str
    start_us: float
    dur_us: float


@dataclass
class RowSet:
    """One side's rows (ours or eager) against its call timed without timers: `coverage`
    is the covered rows' sum over that call (at most 1), `rows_ms` their sum."""

    method: str
    call: Spread
    rows: list[ProfileRow]
    rows_ms: float
    coverage: float | None
    rollups: list[Rollup] = field(default_factory=list)
    timeline: list[TimelineItem] = field(default_factory=list)
    note: str = ""


@dataclass
class OpComparison:
    """The compiled rows and eager's rows that cover the same FX nodes, timed side by side."""

    nodes: list[str]
    ours: list[str]
    eager: list[str]
    ours_ms: float | None
    eager_ms: float | None
    module: str | None = None
    graph: int = 0


@dataclass
class PeakMemory:
    """Bytes allocated during one call above what was live at its start (the allocator's
    high-water mark; `method` says how it was read), beside the memory plan's peak."""

    method: str
    kernelscope: int | None = None
    eager: int | None = None
    plan: int | None = None
    inductor: int | None = None


@dataclass
class TimingConditions:
    """How the figures were taken: threads, the CPUs they were pinned to, the host's load
    (1, 5, 15 min) before and after, whether this run held the host's timing slot, and
    which clock the times read."""

    threads: int | None = None
    cpus: list[int] = field(default_factory=list)
    load_before: list[float] = field(default_factory=list)
    load_after: list[float] = field(default_factory=list)
    slot: str = ""  # "held", "held after waiting N s", "none (no server slot)", ...
    clock: str = ""  # what the CPU times read: the thread's CPU time (one thread) or the wall


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
    eager_time: Spread | None = None  # eager_ms with its spread
    kernelscope_time: Spread | None = None  # kernelscope_ms with its spread
    ours: RowSet | None = None  # every microsecond of our call, in rows
    eager: RowSet | None = None  # eager's call in the same rows
    compare: list[OpComparison] = field(default_factory=list)
    memory: PeakMemory | None = None
    conditions: TimingConditions | None = None
    # Older traces only: Inductor's time and code now come in the `inductor` event.
    inductor: InductorOutput | None = None


@dataclass
class InductorKernel:
    name: str
    language: str
    source: str
    ms: float | None = None  # its median time per launch (the `inductor` event; None: untimed)
    # Where the `inductor` event read them (older traces: none): the graph it belongs to,
    # the graph's FX nodes it covers (Inductor's provenance mapping), the bytes of the
    # buffers the call takes, its kind ("extern" for an extern call, which has no source)
    # and which call of the wrapper this is (unique in the graph: an extern called six
    # times is six entries, "extern_kernels.addmm:2" ..).
    call: str = ""
    graph: int | None = None
    nodes: list[str] = field(default_factory=list)
    bytes: int | None = None
    kind: str = ""


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
    inductor_time: Spread | None = None  # inductor_ms with its spread
    peak_bytes: int | None = None  # its call's allocator high-water mark (PeakMemory's method)
    # Our kernels (A) against Inductor's (B), grouped by the FX nodes they cover
    # (compiler/compare/match.py); empty where Inductor's node mapping was not read.
    groups: list[Group] = field(default_factory=list)


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


WaitingOn = Literal["slot", "warm-up"]


@dataclass
class Waiting:
    """What a job waits on before its worker runs (the server says so at once, then about
    every second while it waits): a free slot (`slot`: every slot runs a job; `position`
    is its place in the queue, 1 first) or a worker still warming up (`warm-up`)."""

    on: WaitingOn
    message: str  # "waiting for a worker: 2 busy, you are 1st"
    busy: int | None = None  # jobs running now (`slot`)
    position: int | None = None  # in the queue (1: next; `slot`)
    waited_s: float = 0.0  # since the job was submitted


@dataclass
class Progress:
    """What a long stage is doing, said whenever the stream has been quiet for about half
    a second while it runs (compiler/progress.py): the graph Dynamo or AOTAutograd is
    on, the library g++ builds, the graph being timed."""

    stage: str  # the stage running ("capture", "compile", ...)
    doing: str  # "AOTAutograd traces Dynamo graph 1 (forward and backward)"
    message: str  # the line to show: "capture: AOTAutograd traces ... (4.2 s)"
    stage_s: float = 0.0  # since the stage began
    done: int | None = None  # of `total` steps (graphs, libraries) finished, where counted
    total: int | None = None


@dataclass
class JobDone(Done):
    """`done` as a reader sees it (ok: every stage ran and `run` found no output that
    differs from eager): the compiler's Done, plus what the server adds when it closes a
    job (server/jobs/worker.py `finish`); the compiler never sets these."""

    wall_ms: float | None = None  # from the request to `done`: what the user waited
    stages_ms: float | None = None  # the sum of the stage times the compiler reported
    snippet_stdout: str | None = None  # the tail of what the snippet wrote to fd 1
    store_error: str | None = None  # why the trace has no permalink
    # Stages that run after `done` (the Inductor comparison): each is appended to the
    # stored trace when it ends, by `follow_ups_until` (Unix seconds) at the latest
    # (server/jobs/followups.py; docs/server.md, "Follow-ups").
    follow_ups: list[str] | None = None
    follow_ups_until: float | None = None
