"""Where a compiled call's time goes, row by row, on the host clock (the CPU backend).

In: each graph's wrapper source and loaded module, which wrapper lines launch which step
(the codegen line map), and the inputs. Out: per graph, one row per kernel and per extern
call, and the wrapper's own host time as a row of its own, each a list of samples (one per
repeat, see runtime/stats.py), plus one call's timeline for a trace export.

How: an instrumented variant of the wrapper's `call` (the same lines, compiled into a copy
of the wrapper module's namespace, so no module-level code runs again) reads the clock
before and after every launch line. The driver reads it before and after each graph's
call. Every nanosecond between the first and the last read lands in exactly one segment:
a launch (the line that calls a kernel or an extern op: its arguments and the call) or
the wrapper (allocations, views, frees, argument handling, the call itself). The cost of
one clock read is measured and taken off every segment, so the wrapper's row is its own
time, measured directly. What the rows miss against the call timed without the clock
reads is the profile's "unaccounted" row (compiler/profiling.py). The clock is the one
runtime/stats.py `clock_for` picks (one thread: the thread's CPU time).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from kernelscope.compiler.runtime.stats import (
    MAX_REPEATS,
    MIN_REPEATS,
    SETTLED_RATIO,
    Clock,
    batch_size,
    percentile,
    read_cost_ns,
)

WRAPPER = "wrapper"  # the label of the wrapper's own segments
CALL_DEF = "def call(args):"


@dataclass
class TimedGraph:
    gid: int
    call: Callable[..., Any]  # call_timed(args, _ts, _c)
    constants: tuple[Any, ...]
    labels: list[str]  # what the segment ending at each stamp is: a step name or WRAPPER
    inputs: list[Any] = field(default_factory=list)


@dataclass
class RowSamples:
    """Per (graph, row) the samples of its time per call, in ms; a timeline of one call."""

    samples: dict[tuple[int, str], list[float]]
    timeline: list[dict[str, Any]]
    stamp_ns: float  # what one clock read costs, taken off every segment
    batch: int
    # The same call without the timers, one sample per repeat, each batch right after the
    # timed one and read by the same clock: what the rows' coverage is measured against.
    plain: list[float] = field(default_factory=list)


def timed_source(source: str, launches: dict[int, str], ranges: str | None = None,
                 def_prefix: str = CALL_DEF, header: str = "def call_timed(args, _ts, _c):"
                 ) -> tuple[str, list[str]]:
    """A function of `source` (the one whose `def` line starts with `def_prefix`, the
    wrapper's `call` by default) as `header`: a clock read (`_ts.append(_c())`) before and
    after each launch line (`launches`: 1-based line -> step name), one read between two
    launches that follow each other. Returns the source of that one function and the label
    of the segment each of its reads closes (the driver's closing read is the last label,
    WRAPPER's). With `ranges` (a prefix), each launch line runs in a profiler range
    `_rf(ranges + step)` instead (the GPU's device times come from CUPTI)."""
    lines, start, end = _function(source, def_prefix)
    out = [header]
    labels: list[str] = []
    after_launch = False
    for number in range(start + 2, end + 1):  # 1-based lines of the body
        text = lines[number - 1]
        step = launches.get(number)
        if step is None:
            out.append(text)
            after_launch = after_launch and not text.strip()
            continue
        indent = text[:len(text) - len(text.lstrip())]
        if ranges is not None:
            out += [f"{indent}with _rf({ranges + step!r}):", f"    {text}"]
            continue
        if not after_launch:
            out.append(f"{indent}_ts.append(_c())")
            labels.append(WRAPPER)
        out += [text, f"{indent}_ts.append(_c())"]
        labels.append(step)
        after_launch = True
    return "\n".join(out) + "\n", [*labels, WRAPPER]


def _function(source: str, def_prefix: str) -> tuple[list[str], int, int]:
    """The lines of `source`, and the 0-based lines of the function's `def` and its end."""
    lines = source.splitlines()
    start = next(i for i, t in enumerate(lines) if t.startswith(def_prefix))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i].strip() and not lines[i].startswith((" ", "\t"))), len(lines))
    return lines, start, end


def timed_graph(gid: int, wrapper: str, module: ModuleType, launches: dict[int, str],
                constants: Sequence[Any], inputs: list[Any], ranges: str | None = None
                ) -> TimedGraph:
    source, labels = timed_source(wrapper, launches, ranges)
    namespace = dict(module.__dict__)
    if ranges is not None:
        from torch.profiler import record_function

        namespace["_rf"] = record_function
    exec(compile(source, f"<timed {getattr(module, '__file__', gid)}>", "exec"), namespace)
    return TimedGraph(gid, namespace["call_timed"], tuple(constants), labels, inputs)


def eager_timed_graph(gid: int, gm: Any, inputs: list[Any]) -> TimedGraph:
    """Eager's side: the FX graph module's own `forward` (torch.fx's code for it) with a
    clock read around each ATen op's line, so eager's rows are measured as ours are (the
    segment labels are FX node names; WRAPPER is the Python between them)."""
    code = gm.graph.python_code(root_module="self")
    nodes = {n.name for n in gm.graph.nodes if n.op == "call_function"}
    launches = {i: name for i, line in enumerate(code.src.splitlines(), 1)
                if (name := line.strip().split(" = ", 1)[0]) in nodes and " = " in line}
    source, labels = timed_source(code.src, launches, def_prefix="def forward(self",
                                  header=_eager_header(code.src))
    namespace = dict(code.globals)
    exec(compile(source, f"<timed graph {gid}>", "exec"), namespace)
    forward = namespace["forward_timed"]

    def call(args: list[Any], ts: list[int], c: Any) -> Any:
        return forward(gm, ts, c, *args)

    return TimedGraph(gid, call, (), labels, inputs)


def _eager_header(src: str) -> str:
    line = next(t for t in src.splitlines() if t.startswith("def forward(self"))
    return line.replace("def forward(self", "def forward_timed(self, _ts, _c", 1)


def one_call(graphs: list[TimedGraph], c: Clock = time.perf_counter_ns) -> list[list[int]]:
    """One timed call of every graph: each graph's clock reads, the driver's first and last."""
    stamps = []
    for g in graphs:
        ts = [c()]
        g.call([*g.inputs, *g.constants], ts, c)
        ts.append(c())
        stamps.append(ts)
    return stamps


def _segments(g: TimedGraph, ts: list[int], stamp_ns: float) -> dict[str, float]:
    """Milliseconds per label of one graph's call (a label's segments added)."""
    if len(ts) != len(g.labels) + 1:
        raise RuntimeError(f"graph {g.gid}: {len(ts)} clock reads, expected "
                           f"{len(g.labels) + 1} (a launch line ran more or less than once)")
    out: dict[str, float] = {}
    for label, a, b in zip(g.labels, ts, ts[1:]):
        out[label] = out.get(label, 0.0) + max(0.0, b - a - stamp_ns) / 1e6
    return out


def _timeline(graphs: list[TimedGraph], stamps: list[list[int]], stamp_ns: float
              ) -> list[dict[str, Any]]:
    t0 = stamps[0][0]
    return [{"graph": g.gid, "name": label, "start_us": round((a - t0) / 1e3, 3),
             "dur_us": round(max(0.0, b - a - stamp_ns) / 1e3, 3)}
            for g, ts in zip(graphs, stamps) for label, a, b in zip(g.labels, ts, ts[1:])]


def measure_rows(graphs: list[TimedGraph], budget_s: float = 1.0, min_repeat_ms: float = 2.0,
                 clock: Clock = time.perf_counter_ns,
                 plain: Callable[[], Any] | None = None,
                 plain_clock: Clock = time.perf_counter_ns) -> RowSamples:
    """Row samples over repeats of the timed call (each repeat the per-row median of a
    batch of calls), repeating until the rows' sum has settled or the budget is spent.
    With `plain` (the same call without timers), each repeat also times a batch of it
    (by `plain_clock`, the one the call's own figure reads), so the rows and the call they
    should add up to are read at the same moments (on a loaded host two sessions a second
    apart differ by more than the rows miss)."""
    plain_ns = read_cost_ns(plain_clock)
    stamp_ns = read_cost_ns(clock)
    one_call(graphs, clock)  # warm
    first = one_call(graphs, clock)
    batch = batch_size((first[-1][-1] - first[0][0]) / 1e6, min_repeat_ms)
    samples: dict[tuple[int, str], list[float]] = {}
    totals: list[float] = []
    plains: list[float] = []
    timeline: list[dict[str, Any]] = []
    deadline = time.perf_counter() + budget_s
    while len(totals) < MAX_REPEATS:
        calls = [one_call(graphs, clock) for _ in range(batch)]
        if plain is not None:
            plains.append(statistics.median(_plain_ms(plain, plain_clock, plain_ns)
                                            for _ in range(batch)))
        per_call = [{(g.gid, k): v for g, ts in zip(graphs, call)
                     for k, v in _segments(g, ts, stamp_ns).items()} for call in calls]
        for key in per_call[0]:
            samples.setdefault(key, []).append(statistics.median(c[key] for c in per_call))
        totals.append(statistics.median(sum(c.values()) for c in per_call))
        if len(totals) == (MIN_REPEATS + 1) // 2:
            timeline = _timeline(graphs, calls[len(calls) // 2], stamp_ns)
        settled = percentile(totals, 90) <= SETTLED_RATIO * percentile(totals, 10)
        if len(totals) >= MIN_REPEATS and (settled or time.perf_counter() > deadline):
            break
    return RowSamples(samples, timeline, stamp_ns, batch, plains)


def _plain_ms(call: Callable[[], Any], clock: Clock, stamp_ns: float) -> float:
    start = clock()
    call()
    return max(0.0, clock() - start - stamp_ns) / 1e6
