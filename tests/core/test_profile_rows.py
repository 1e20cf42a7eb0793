"""The `profile` stage's rows and spreads: every microsecond of a compiled call in a row
(kernels, extern calls, the wrapper), the "unaccounted" rest, eager's rows, and the rule
that makes a time "noisy"."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kernelscope.compiler.events import types as ev
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline
from kernelscope.compiler.runtime import rows, slot, stats
from kernelscope.compiler.runtime.slot import timing_slot

MLP = """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.up = nn.Linear(64, 256)
        self.down = nn.Linear(256, 64)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x

model = Model().eval().requires_grad_(False)
example_inputs = (torch.randn(32, 64),)
"""


def _profile(path: Path) -> dict[str, Any]:
    opts = CompileOptions(device="cpu", backend="cpp", cache_dir=str(path.parent / "cache"))
    events = {e.stage: e.data for e in run_pipeline(MLP, opts, str(path))}
    assert events["done"]["ok"], events.get("error")
    codegen = events["codegen"]["graphs"]
    data: dict[str, Any] = events["profile"]
    data["_kernels"] = [k["name"] for g in codegen for k in g["kernels"]]
    data["_path"] = path
    return data


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("mlp") / "mlp.py"
    path.write_text(MLP)
    return _profile(path)


def test_rows_cover_the_call(profile: dict[str, Any]) -> None:
    """Our rows (kernels, externs, the wrapper measured directly) cover >= 95% of the call
    timed without the clock reads, and never count much more than it. A host busy with
    other work (CI runs two test workers on two cores) can push one profile's rows and
    call apart; the claim is that a profile can account for the call, so a short one is
    profiled again (twice at most, from the build cache) before the test fails."""
    attempts = [profile["ours"]]
    while attempts[-1]["coverage"] < 0.95 and len(attempts) < 3:
        attempts.append(_profile(profile["_path"])["ours"])
    ours = max(attempts, key=lambda o: o["coverage"])
    call = ours["call"]["ms"]
    assert ours["coverage"] >= 0.95, [(o["coverage"], o["rows"]) for o in attempts]
    # the rows' own clock reads are taken off as calibrated, not exactly (one read of the
    # thread's CPU clock is a system call, ~0.6 us, some 20 of them in a 0.1 ms call)
    assert ours["rows_ms"] <= 1.25 * call
    kinds = {r["kind"] for r in ours["rows"]}
    assert {"kernel", "extern", "wrapper", "unaccounted"} <= kinds


def test_unaccounted_row_is_the_rest_and_never_covered(profile: dict[str, Any]) -> None:
    ours = profile["ours"]
    rest = [r for r in ours["rows"] if r["kind"] == "unaccounted"]
    assert len(rest) == 1 and rest[0]["covered"] is False
    covered = sum(r["time"]["ms"] for r in ours["rows"] if r["covered"])
    assert covered == pytest.approx(ours["rows_ms"], abs=1e-3)
    assert covered + rest[0]["time"]["ms"] >= ours["call"]["ms"] - 1e-3
    assert ours["coverage"] == pytest.approx(min(covered, ours["call"]["ms"])
                                             / ours["call"]["ms"], abs=1e-3)


def test_every_kernel_and_extern_has_a_row(profile: dict[str, Any]) -> None:
    ours = profile["ours"]["rows"]
    assert sorted(r["name"] for r in ours if r["kind"] == "kernel") == sorted(profile["_kernels"])
    externs = [r for r in ours if r["kind"] == "extern"]
    assert len(externs) == 4  # two Linear layers in each of two blocks
    for r in externs:
        assert r["op"].startswith("aten.") and r["library"] in ("MKL", "ATen BLAS")
        assert [32, 64] in r["shapes"] or [32, 256] in r["shapes"]
        assert r["module"] in ("blocks.0.up", "blocks.0.down", "blocks.1.up", "blocks.1.down")
    assert all(r["time"]["repeats"] >= stats.MIN_REPEATS for r in ours if r["covered"])


def test_rollups_by_module_and_graph(profile: dict[str, Any]) -> None:
    ours = profile["ours"]
    by_module = {r["key"]: r for r in ours["rollups"] if r["by"] == "module"}
    assert {"blocks", "blocks.0", "blocks.1", "blocks.0.up"} <= set(by_module)
    # a parent holds its children's time and that of rows whose common path is the parent
    # (a kernel fusing the end of blocks.0 with the start of blocks.1)
    under = [r["time"]["ms"] for r in ours["rows"] if (r["module"] or "").startswith("blocks")]
    assert by_module["blocks"]["ms"] == pytest.approx(sum(under), abs=1e-3)
    assert by_module["blocks"]["ms"] >= by_module["blocks.0"]["ms"] + by_module["blocks.1"]["ms"]
    graphs = [r for r in ours["rollups"] if r["by"] == "graph"]
    assert sum(r["ms"] for r in graphs) == pytest.approx(ours["rows_ms"], abs=1e-3)


def test_eager_rows_and_the_comparison_by_fx_node(profile: dict[str, Any]) -> None:
    eager = profile["eager"]
    ops = [r for r in eager["rows"] if r["kind"] == "op"]
    assert any(r["op"] == "aten.addmm.default" for r in ops)
    assert all(len(r["origins"]) == 1 for r in ops)
    assert any(r["kind"] == "host" for r in eager["rows"])
    assert eager["coverage"] >= 0.8
    both = [c for c in profile["compare"] if c["ours"] and c["eager"]]
    assert both and all(c["ours_ms"] is not None and c["eager_ms"] is not None for c in both)


def test_conditions_and_peak_memory(profile: dict[str, Any]) -> None:
    cond = profile["conditions"]
    assert cond["threads"] == 1 and len(cond["cpus"]) == 1 and len(cond["load_before"]) == 3
    assert cond["clock"] == stats.THREAD_CPU
    mem = profile["memory"]
    assert mem["kernelscope"] > 0 and mem["eager"] > 0 and mem["plan"] > 0
    assert profile["kernelscope_time"]["repeats"] >= stats.MIN_REPEATS


def test_noisy_rule() -> None:
    assert not stats.is_noisy(1.0, 1.5)
    assert stats.is_noisy(1.0, 1.51)
    assert stats.is_noisy(0.0, 0.1)
    s = stats.spread([1.0, 1.0, 1.0, 1.0, 10.0])
    assert s["ms"] == 1.0 and s["repeats"] == 5 and s["p90"] > 1.5 and s["noisy"]
    assert not stats.spread([1.0, 1.1, 1.05, 1.02, 0.98])["noisy"]
    assert stats.percentile([1, 2, 3, 4, 5], 10) == pytest.approx(1.4)
    assert ev.Spread(**stats.spread([2.0] * 5)).ms == 2.0


def test_repeats_are_at_least_five() -> None:
    samples = stats.repeats(lambda: sum(range(100)), budget_s=0.0)
    assert len(samples) >= stats.MIN_REPEATS


def test_one_thread_reads_its_cpu_time_so_waiting_is_not_counted() -> None:
    """A call that sleeps (waits, as for a core another job holds) costs its thread no CPU
    time: the one-thread clock does not see the wait; the wall clock does."""
    import time

    clock, name = stats.clock_for(1)
    assert name == stats.THREAD_CPU
    cpu = stats.repeats(lambda: time.sleep(0.002), budget_s=0.0, clock=clock)
    wall = stats.repeats(lambda: time.sleep(0.002), budget_s=0.0,
                         clock=stats.clock_for(2)[0])
    assert max(cpu) < 0.5 and min(wall) >= 2.0


def test_timed_source_reads_the_clock_around_each_launch() -> None:
    wrapper = ("import torch\n\n\ndef call(args):\n    a, = args\n    b = k0(a)\n"
               "    c = k1(b)\n    del b\n    return (c, )\n\nX = 1\n")
    source, labels = rows.timed_source(wrapper, {6: "k0", 7: "k1"})
    assert labels == [rows.WRAPPER, "k0", "k1", rows.WRAPPER]
    assert source.count("_ts.append(_c())") == 3  # one read between the two launches
    assert "X = 1" not in source
    namespace: dict[str, Any] = {"k0": lambda a: a + 1, "k1": lambda b: b * 2}
    exec(source, namespace)
    ts = [0]
    assert namespace["call_timed"]([3], ts, lambda: len(ts)) == (8, )
    assert len(ts) == len(labels)  # the driver adds the last read


def test_timing_slot_takes_the_lock_and_pins(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import fcntl
    import os

    lock = tmp_path / "timing.lock"
    lock.write_text("")
    monkeypatch.setenv("KERNELSCOPE_TIMING_LOCK", str(lock))
    with timing_slot(1, cpu=True) as facts:
        assert facts["slot"] == "held" and len(facts["cpus"]) == 1
        assert os.sched_getaffinity(0) == set(facts["cpus"])
        other = os.open(lock, os.O_RDONLY)
        with pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(other)
    assert len(os.sched_getaffinity(0)) >= 1
    other = os.open(lock, os.O_RDONLY)
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released
    with timing_slot(1, cpu=True, wait_s=0.1) as facts:
        assert facts["slot"].startswith("not held")
    os.close(other)


def test_the_idlest_cpus_are_looked_for_only_when_there_is_a_choice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Timing with as many threads as there are CPUs used to wait 0.1 s of every job's
    profile to read which CPUs were idle, then take them all."""
    reads: list[dict[int, int]] = []
    ticks = iter([{0: 5, 1: 9}, {0: 6, 1: 20}])  # CPU 1 idle longer over the window
    monkeypatch.setattr(slot, "_idle_ticks", lambda: reads.append(next(ticks)) or reads[-1])
    assert slot.idlest([1, 0], 2) == [0, 1] and reads == []
    assert slot.idlest([0, 1], 1, window_s=0.0) == [1] and len(reads) == 2


def test_the_gpu_variant_runs_each_launch_in_a_profiler_range() -> None:
    """On a GPU each launch line runs inside `_rf("<graph>:<step>")`, a torch.profiler
    range whose kernels' device time (CUPTI) is the step's row."""
    import contextlib

    wrapper = ("def call(args):\n    a, = args\n    b = k0(a)\n    c = k1(b)\n"
               "    return (c, )\n")
    source, _ = rows.timed_source(wrapper, {3: "k0", 4: "k1"}, ranges="2:")
    entered: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def rf(name: str) -> Any:
        entered.append(("enter", name))
        yield
        entered.append(("exit", name))

    namespace: dict[str, Any] = {"_rf": rf, "k0": lambda a: entered.append(("k0", "")) or a,
                                 "k1": lambda b: entered.append(("k1", "")) or b}
    exec(source, namespace)
    assert namespace["call_timed"]([1], [], None) == (1, )
    assert entered == [("enter", "2:k0"), ("k0", ""), ("exit", "2:k0"),
                       ("enter", "2:k1"), ("k1", ""), ("exit", "2:k1")]


def test_the_call_the_rows_cover_is_timed_between_their_batches() -> None:
    """Coverage compared the rows with the call timed in another session (a second
    earlier): on a loaded host the two drifted apart by more than the rows missed (the
    6-block training step read 94-100% from run to run). The plain call is now timed in
    the rows' own repeats, one batch after each timed one, by the call's own clock."""
    order: list[str] = []
    namespace: dict[str, Any] = {"k0": lambda a: order.append("timed") or a}
    exec(rows.timed_source("def call(args):\n    a, = args\n    b = k0(a)\n    return (b, )\n",
                           {3: "k0"})[0], namespace)
    graph = rows.TimedGraph(0, namespace["call_timed"], (), [rows.WRAPPER, "k0", rows.WRAPPER],
                            [1])
    plain_reads: list[int] = []

    def plain_clock() -> int:
        plain_reads.append(1)
        return time.perf_counter_ns()

    measured = rows.measure_rows([graph], budget_s=0.05, min_repeat_ms=0.01,
                                 plain=lambda: order.append("plain"), plain_clock=plain_clock)
    repeats = len(measured.samples[(0, "k0")])
    assert len(measured.plain) == repeats >= 5
    assert all(ms >= 0 for ms in measured.plain) and plain_reads
    # A batch of timed calls, then a batch of plain ones, repeat after repeat.
    runs = "".join("t" if o == "timed" else "p" for o in order[2:])  # after the warm-ups
    assert runs.startswith("t" * measured.batch + "p" * measured.batch), runs[:40]
