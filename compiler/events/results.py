"""The payloads of the result stages and the stream's end: `run`, `profile`, `inductor`,
`error` and `done`.

Part of the typed event model: compiler/events/types.py gathers every stage's payload."""

from __future__ import annotations

from dataclasses import dataclass, field

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
