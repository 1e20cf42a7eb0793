"""The benchmark runner's CPU smoke run: every suite case at smoke size, checked against
eager through Kernelscope's C++ backend. Timings are printed by the runner, never asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import cases
from benchmarks.report import is_ok
from benchmarks.run import main


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "ks-cache"))


def test_cpu_smoke_suite_matches_eager(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    names = ",".join(cases.CPU_SUITE)
    rc = main(["--device", "cpu", "--size", "smoke", "--only", "suite", "--cases", names,
               "--no-inductor", "--no-isolate", "--warmup", "1", "--rep", "5",
               "--out", "-", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["case"] for r in rows] == cases.CPU_SUITE
    bad = {r["case"]: r.get("kernelscope") for r in rows if not is_ok(r)}
    assert not bad and rc == 0, bad
    for r in rows:  # every case was timed and checked on both sides
        assert r["eager"]["ms"] > 0 and r["kernelscope"]["ms"] > 0
        assert r["kernelscope"]["check"]["ok"]


def test_a_wrong_result_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a backend that returns a perturbed result is flagged."""
    import benchmarks.measure as measure

    def wrong(options: object = None) -> object:
        def backend(gm, inputs):  # type: ignore[no-untyped-def]
            return lambda *args: [t + 1 for t in gm(*args)]
        return backend

    monkeypatch.setattr(measure, "kernelscope", wrong)
    out = tmp_path / "bench.json"
    rc = main(["--device", "cpu", "--size", "smoke", "--only", "suite", "--cases", "cos_sin",
               "--no-inductor", "--no-isolate", "--warmup", "1", "--rep", "2",
               "--out", "-", "--json", str(out)])
    row = json.loads(out.read_text())["rows"][0]
    assert rc == 1 and not row["kernelscope"]["check"]["ok"]


def test_kernelscope_options_reach_the_compile(tmp_path: Path) -> None:
    """`--ks-options` (an A/B against the defaults): the basic block with channels-last
    forced on the CPU matches eager; an unknown layout fails the compile, so the options
    are what compiled it."""
    out = tmp_path / "bench.json"
    common = ["--device", "cpu", "--size", "smoke", "--only", "suite", "--cases",
              "basic_block", "--no-inductor", "--no-isolate", "--warmup", "1", "--rep", "2",
              "--out", "-", "--json", str(out)]
    assert main([*common, "--ks-options", '{"conv_layout": "channels_last"}']) == 0
    assert json.loads(out.read_text())["settings"]["ks_options"] == {
        "conv_layout": "channels_last"}
    assert main([*common, "--ks-options", '{"conv_layout": "nhwc"}']) == 1
    row = json.loads(out.read_text())["rows"][0]
    assert "error" in row["kernelscope"] and "ms" not in row["kernelscope"]


def test_ks_options_b_is_a_second_kernelscope_column(tmp_path: Path) -> None:
    """`--ks-options-b`: the case compiled again with a second option set in the same run
    (column kernelscope_b), checked like the first; an unknown realize rule fails that
    column only, so the options are what compiled it."""
    out = tmp_path / "bench.json"
    common = ["--device", "cpu", "--size", "smoke", "--only", "suite", "--cases",
              "layernorm_backward", "--no-inductor", "--no-isolate", "--warmup", "1", "--rep",
              "2", "--out", "-", "--json", str(out), "--ks-options", '{"realize": "inline-cheap"}']
    assert main([*common, "--ks-options-b", '{"realize": "shared"}']) == 0
    row = json.loads(out.read_text())["rows"][0]
    assert "ms" in row["kernelscope"] and "ms" in row["kernelscope_b"], row
    assert main([*common, "--ks-options-b", '{"realize": "always"}']) == 1
    row = json.loads(out.read_text())["rows"][0]
    assert "ms" in row["kernelscope"] and "error" in row["kernelscope_b"], row


def test_stage_times_probe_reports_every_stage() -> None:
    """`--only stages`: an item per sample, run as the runner runs it (a process of its
    own, so the first compile is cold), with cold and warm ms for each stage."""
    import subprocess
    import sys

    from benchmarks.run import RESULT_TAG, ROOT
    from benchmarks.stages import STAGES, stages_table

    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "--child", "stages:add_relu",
                           "--settings", json.dumps({"device": "cpu"})], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    rows = [json.loads(line[len(RESULT_TAG):]) for line in proc.stdout.splitlines()
            if line.startswith(RESULT_TAG)]
    assert rows, proc.stderr[-2000:]
    row = rows[0]
    assert "failed" not in row, row
    for run in ("cold", "warm"):
        assert set(STAGES) <= set(row[run]) and row[run]["total"] > 0
        # The total is timed around the stages, so it also holds the gaps between them: a few
        # ms on a loaded 2-core machine (6.8 against 2.5 seen), never less than their sum.
        parts = sum(row[run][s] for s in STAGES)
        assert parts - 0.5 <= row[run]["total"] <= parts + max(10.0, 0.5 * parts)
    assert is_ok(row) and "| add_relu |" in stages_table([row])
