"""The `profile` stage: eager and our compiled call timed with their spreads, and every
microsecond of each call in rows.

In: the graphs `compile` built (GraphWork: wrapper, line map, schedule, loaded module),
their inputs, the options. Out: the `profile` event (events/results.py `Profile`):

- each call (eager, ours) as a median over repeats with p10..p90 (runtime/stats.py);
- our rows: every kernel, every extern call (op, shapes, library) and the wrapper's own
  host time, from an instrumented wrapper (runtime/rows.py; on a GPU the device times
  come from CUPTI through torch.profiler: runtime/torch_profile.py); what the rows miss
  against the call timed without timers is an "unaccounted" row, never covered;
- eager's rows: each ATen op of the same graphs (torch.profiler), its Python between ops;
- rollups by module path, by graph, by forward/backward; the rows of ours and eager that
  cover the same FX nodes side by side; the allocator's peak of one call of each;
- the conditions: threads, pinned CPUs, the host's load, the timing slot (runtime/slot.py).
docs/profile.md explains the method.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelscope.compiler.devices import CPU, is_gpu
from kernelscope.compiler.events import types as ev
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.profile_rows import compare_rows, node_shapes, rollups, step_rows
from kernelscope.compiler.runtime import rows as timed
from kernelscope.compiler.runtime import stats, torch_profile
from kernelscope.compiler.runtime.profile import bench_samples, copy_bandwidth_gbps
from kernelscope.compiler.runtime.slot import timing_slot

Inputs = list[list[Any]]
# Seconds each side's rows may repeat for when their sum does not settle (a loaded host):
# half the headline figures' budget (rows are at least MIN_REPEATS repeats whatever this is).
ROWS_BUDGET_S = 0.5
# Rows read the wall clock, whatever the call's clock: a read of the thread's CPU time is a
# system call whose cost inside a wrapper runs above its calibration, and a row is short
# enough that the batch median keeps out the preemptions a whole call cannot escape.
ROW_CLOCK = time.perf_counter_ns


def each(fns: Sequence[Callable[..., Any]], inputs: Inputs) -> Callable[[], None]:
    """One zero-argument call that runs every graph on its inputs, as a step runs them."""
    def call() -> None:
        for fn, args in zip(fns, inputs):
            fn(*list(args))

    return call


def profile_works(works: list[GraphWork], inputs: Inputs, options: CompileOptions,
                  doing: Callable[[str], None] = lambda _: None) -> ev.Profile:
    """Our compiled call and eager's, timed with spreads, in rows (docs/profile.md);
    `doing` is told which part runs (the `progress` events)."""
    if not options.profile:
        return ev.Profile(measured=False, reason="profiling is off")
    emulated = next((w.backend for w in works if w.backend and w.backend.emulated), None)
    if emulated is not None:
        return ev.Profile(measured=False, device=emulated.device,
                          reason=f"{emulated.label} kernels ran emulated on the "
                                 f"{emulated.device}: their timings would mean nothing")
    cuda = is_gpu(options.device)
    compiled = [w.compiled for w in works]
    assert all(c is not None for c in compiled), "compile stage did not run"
    eager_call = each([w.gm for w in works], inputs)
    ours_call = each(compiled, inputs)  # type: ignore[arg-type]
    doing("waiting for the host's timing slot")
    with timing_slot(options.threads, cpu=not cuda) as facts:
        clock, facts["clock"] = stats.clock_for(facts["threads"]) if not cuda else \
            (time.perf_counter_ns, "CUDA events and CUPTI")
        doing("eager's call, repeated")
        eager_t = ev.Spread(**stats.spread(bench_samples(eager_call, cuda, clock)))
        doing("our compiled call, repeated")
        ours_t = ev.Spread(**stats.spread(bench_samples(ours_call, cuda, clock)))
        doing("our call's rows (kernels, extern calls, wrapper)")
        ours = _ours_rows(works, inputs, ours_t, cuda, clock, ours_call)
        doing("eager's rows (one per ATen op)")
        eager = _eager_rows(works, inputs, eager_t, cuda, clock, eager_call)
        doing("peak memory, ours and eager")
        memory = ev.PeakMemory(
            method=torch_profile.peak_method(cuda),
            kernelscope=torch_profile.peak_bytes(ours_call, cuda),
            eager=torch_profile.peak_bytes(eager_call, cuda),
            plan=max((w.memory.peak_bytes for w in works if w.memory), default=None))
    return ev.Profile(
        measured=True, device=torch.cuda.get_device_name() if cuda else CPU,
        eager_ms=eager_t.ms, kernelscope_ms=ours_t.ms, eager_time=eager_t,
        kernelscope_time=ours_t, peak_gbps=copy_bandwidth_gbps() if cuda else None,
        kernels=_kernel_times(works, ours, cuda), ours=ours, eager=eager,
        compare=compare_rows(ours.rows, eager.rows), memory=memory,
        conditions=ev.TimingConditions(**facts))


def _launches(w: GraphWork) -> dict[int, str]:
    return {int(e["line"]): str(e["kernel"]) for e in w.wrapper_line_map if e.get("kernel")}


def _ours_rows(works: list[GraphWork], inputs: Inputs, call: ev.Spread, cuda: bool,
               clock: stats.Clock, plain: Callable[[], None]) -> ev.RowSet:
    graphs = [timed.timed_graph(w.gid, w.wrapper, w.compiled.module, _launches(w),
                                w.compiled.constants, list(args),
                                ranges=f"{w.gid}:" if cuda else None)
              for w, args in zip(works, inputs) if w.compiled is not None]
    if cuda:
        return _device_rows(works, graphs, call)
    measured = timed.measure_rows(graphs, ROWS_BUDGET_S, clock=ROW_CLOCK,
                                  plain=plain, plain_clock=clock)
    rows = [r for w in works for r in step_rows(w, measured.samples, cuda=False)]
    method = ("per-launch clock reads in an instrumented copy of the wrapper (the cost "
              f"of one read, {measured.stamp_ns:.0f} ns, taken off each segment), against "
              "the call without them, timed between the rows' batches")
    return _row_set(method, _alongside(measured), rows, works, measured.timeline)


def _alongside(measured: timed.RowSamples) -> ev.Spread:
    """The call without timers, as timed between the rows' batches (rows/coverage)."""
    return ev.Spread(**stats.spread(measured.plain))


def _device_rows(works: list[GraphWork], graphs: list[timed.TimedGraph], call: ev.Spread
                 ) -> ev.RowSet:
    """GPU: each step's kernels' device time (CUPTI), and the device's idle time inside
    the call (the host's wrapper and launches it waited on) as the wrapper's rows."""
    n = max(stats.MIN_REPEATS * 3, min(60, int(50 / max(call.ms or 1.0, 0.05))))
    steps, idle = torch_profile.step_device_rows(lambda: timed.one_call(graphs), n)
    samples: dict[tuple[int, str], list[float]] = {}
    for key, values in steps.items():
        gid, _, step = key.partition(":")
        samples[(int(gid), step)] = _repeat_medians(values)
    samples[(works[0].gid, timed.WRAPPER)] = _repeat_medians(idle)
    rows = [r for w in works for r in step_rows(w, samples, cuda=True)]
    return _row_set("device times from CUPTI (torch.profiler); the wrapper's row is the "
                    "device's idle time inside the call", call, rows, works, [])


def _repeat_medians(values: list[float], repeats: int = stats.MIN_REPEATS + 2) -> list[float]:
    """Per-call samples as `repeats` samples, each the median of its share of calls."""
    if len(values) <= repeats:
        return list(values)
    size = len(values) // repeats
    return [statistics.median(values[i * size:(i + 1) * size]) for i in range(repeats)]


def _eager_rows(works: list[GraphWork], inputs: Inputs, call: ev.Spread, cuda: bool,
                clock: stats.Clock, plain: Callable[[], None]) -> ev.RowSet:
    """Eager's rows: on the CPU each ATen op's line of the graph module's forward between
    clock reads (as ours); on a GPU each op's kernels' device time (CUPTI)."""
    if not cuda:
        graphs = [timed.eager_timed_graph(w.gid, w.gm, list(a)) for w, a in zip(works, inputs)]
        measured = timed.measure_rows(graphs, ROWS_BUDGET_S, clock=ROW_CLOCK,
                                      plain=plain, plain_clock=clock)
        rows = [_eager_row(w, label, v) for w in works for (gid, label), v
                in measured.samples.items() if gid == w.gid]
        return _row_set("per-op clock reads in an instrumented copy of the graph module's "
                        "forward, against the call without them, timed between the rows' "
                        "batches", _alongside(measured), rows, works,
                        measured.timeline)
    n = max(stats.MIN_REPEATS * 3, min(60, int(40 / max(call.ms or 1.0, 0.05))))
    rows = []
    for w, args in zip(works, inputs):
        ops = torch_profile.eager_op_rows(w.gm, functools.partial(w.gm, *args), n, cuda)
        rows += [_eager_row(w, key, _repeat_medians(values))
                 for key, values in ops.samples.items()]
    return _row_set("torch.profiler: each ATen op's device time (CUPTI)", call, rows,
                    works, [])


def _eager_row(w: GraphWork, key: str, samples: list[float]) -> ev.ProfileRow:
    time = ev.Spread(**stats.spread(samples))
    if key in (timed.WRAPPER, torch_profile.HOST):
        return ev.ProfileRow(f"eager Python (graph {w.gid})", "host", time, w.gid, w.kind,
                             library="Python")
    node = next((n for n in w.gm.graph.nodes if n.name == key), None)
    if node is None:  # an op event no FX node matched (GPU)
        return ev.ProfileRow(key.removeprefix("?"), "op", time, w.gid, w.kind,
                             op=key.removeprefix("?"), library="ATen")
    return ev.ProfileRow(key, "op", time, w.gid, w.kind, op=str(node.target),
                         shapes=node_shapes(node), library="ATen",
                         module=w.modules.get(key), origins=[key])


def _row_set(method: str, call: ev.Spread, rows: list[ev.ProfileRow], works: list[GraphWork],
             timeline: list[dict[str, Any]] | list[ev.TimelineItem]) -> ev.RowSet:
    """Rows with their share of the call, the "unaccounted" rest, coverage and rollups."""
    covered = sum(r.time.ms or 0.0 for r in rows)
    total = call.ms or 0.0
    note = ""
    if total and covered > total * 1.05:
        note = (f"the rows add up to {100 * covered / total:.0f}% of the call timed without "
                "timers: the timers' own cost")
    rest = max(0.0, total - covered)
    rows = [*rows, ev.ProfileRow("unaccounted", "unaccounted",
                                 ev.Spread(round(rest, 4), repeats=call.repeats), -1,
                                 covered=False)]
    for r in rows:
        r.pct = round(100 * (r.time.ms or 0.0) / total, 2) if total else None
    items = [t if isinstance(t, ev.TimelineItem) else ev.TimelineItem(**t) for t in timeline]
    return ev.RowSet(method, call, rows, round(covered, 4),
                     round(min(covered, total) / total, 4) if total else None,
                     rollups(rows, total, {w.gid: w.kind for w in works}), items, note)


def _kernel_times(works: list[GraphWork], ours: ev.RowSet, cuda: bool) -> list[ev.KernelTime]:
    """The generated kernels' rows with the bytes each moves and its bandwidth."""
    nbytes = {}
    for w in works:
        for step in w.sched.steps if w.sched else []:
            if step.plan is not None:
                plan = step.plan
                nbytes[(w.gid, step.name)] = sum(plan.buffers[b].layout.nbytes()
                                                 for b in plan.inputs + plan.stores)
    peak = copy_bandwidth_gbps() if cuda else None
    out = []
    for r in ours.rows:
        if r.kind != "kernel":
            continue
        k = ev.KernelTime(r.name, r.time.ms, time=r.time, graph=r.graph)
        moved = nbytes.get((r.graph, r.name))
        if moved is not None and r.time.ms:
            k.bytes, k.gbps = moved, round(moved / (r.time.ms * 1e-3) / 1e9, 1)
            k.pct_peak = round(100 * k.gbps / peak, 1) if peak else None
        out.append(k)
    return out
