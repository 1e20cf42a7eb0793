"""What a measured time is: the median of repeats, with its spread and its repeat count.

In: samples (milliseconds, one per repeat). Out: a `Spread` (median, p10, p90, repeats,
noisy). One rule for every figure the `profile` stage reports, eager, ours, Inductor and
each row: at least MIN_REPEATS repeats; a figure whose p90/p10 is above NOISY_RATIO is
"noisy" and the UI shows its range instead of one number. docs/profile.md explains the
method.

A repeat is itself the median of a batch of calls, the batch sized so that a repeat lasts
at least `min_repeat_ms`: a preemption by another process stretches a few calls of a
batch, not its median, so the spread between repeats measures the code, not the host's
scheduler (the way `timeit` repeats batches, with a median where it takes a mean).

The clock (`clock_for`): with one CPU thread, the thread's CPU time (the time the code
ran, not the time it waited for a core another job held: a call longer than a scheduler
slice is preempted on a loaded host every time, so no batch median can remove that);
with more threads, whose CPU times add up, the wall clock.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

Clock = Callable[[], int]  # nanoseconds
WALL = "wall clock"
THREAD_CPU = "the thread's CPU time"


def clock_for(threads: int | None) -> tuple[Clock, str]:
    """The clock a CPU timing with `threads` threads reads, and its name."""
    if threads == 1:
        return time.thread_time_ns, THREAD_CPU
    return time.perf_counter_ns, WALL


def read_cost_ns(clock: Clock, n: int = 2000) -> float:
    """The median cost of one `_ts.append(clock())`, as the timed wrapper makes it."""
    ts: list[int] = []
    for _ in range(n):
        ts.append(clock())
    return float(statistics.median(b - a for a, b in zip(ts, ts[1:])))

MIN_REPEATS = 5
NOISY_RATIO = 1.5  # p90 / p10 above this: the figure is "noisy", not one number
SETTLED_RATIO = 1.05  # stop repeating early once p90 / p10 is this tight
MAX_REPEATS = 25


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between the closest ranks."""
    xs = sorted(values)
    if not xs:
        raise ValueError("no values")
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def is_noisy(p10: float, p90: float) -> bool:
    """A spread wider than NOISY_RATIO (p90/p10); a p10 of zero with a p90 above it too."""
    if p90 <= 0:
        return False
    return p10 <= 0 or p90 / p10 > NOISY_RATIO


def spread(samples: Sequence[float], digits: int = 4) -> dict[str, Any]:
    """The payload of one time (events/results.py `Spread`) from its repeats' samples."""
    if not samples:
        return {"ms": None, "p10": None, "p90": None, "repeats": 0, "noisy": False}
    p10, p90 = percentile(samples, 10), percentile(samples, 90)
    return {"ms": round(statistics.median(samples), digits), "p10": round(p10, digits),
            "p90": round(p90, digits), "repeats": len(samples), "noisy": is_noisy(p10, p90)}


def batch_size(one_ms: float, min_repeat_ms: float) -> int:
    """Calls per repeat: enough that one repeat takes at least `min_repeat_ms`."""
    return max(1, min(1000, int(min_repeat_ms / max(one_ms, 1e-4)) + 1))


def repeats(fn: Callable[[], Any], budget_s: float = 1.0, min_repeat_ms: float = 2.0,
            min_repeats: int = MIN_REPEATS, max_repeats: int = MAX_REPEATS,
            clock: Clock = time.perf_counter_ns) -> list[float]:
    """Per-call milliseconds of `fn`, one sample per repeat (the median of its batch).

    Repeats until `min_repeats` are in and their spread has settled (p90/p10 at most
    SETTLED_RATIO), or `max_repeats`, or the budget is spent (never fewer than
    `min_repeats`)."""
    fn()  # warm: first-call costs are no repeat's
    cost = read_cost_ns(clock, 200)
    batch = batch_size(_one_repeat(fn, 1, clock, cost), min_repeat_ms)
    deadline = time.perf_counter() + budget_s
    samples: list[float] = []
    while len(samples) < max_repeats:
        samples.append(_one_repeat(fn, batch, clock, cost))
        if len(samples) < min_repeats:
            continue
        settled = percentile(samples, 90) <= SETTLED_RATIO * percentile(samples, 10)
        if settled or time.perf_counter() > deadline:
            break
    return samples


def _one_repeat(fn: Callable[[], Any], batch: int, clock: Clock, cost_ns: float) -> float:
    """The median ms of `batch` calls, less one clock read's cost each."""
    times = []
    for _ in range(batch):
        start = clock()
        fn()
        times.append(clock() - start)
    return max(0.0, statistics.median(times) - cost_ns) / 1e6
