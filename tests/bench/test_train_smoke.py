"""The benchmark runner's training section in its CPU smoke mode: tiny configs of the five
architectures, one training step each (bf16 autocast, forward + backward) through
Kernelscope's C++ backend, loss and every gradient checked against eager. Timings are
printed, never asserted. The vision models need torchvision; where it is not installed
their rows say so (skipped)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks.report import is_ok
from benchmarks.run import main
from benchmarks.timing import ROUNDS
from benchmarks.training import TRAIN_MODELS


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "ks-cache"))


def _run(tmp_path: Path, models: str) -> tuple[int, list[dict]]:  # type: ignore[type-arg]
    out = tmp_path / "bench.json"
    rc = main(["--device", "cpu", "--size", "smoke", "--only", "train", "--train-models",
               models, "--no-inductor", "--no-isolate", "--warmup", "1", "--rep", "3",
               "--out", "-", "--json", str(out)])
    return rc, json.loads(out.read_text())["rows"]


def test_cpu_smoke_training_steps_match_eager(tmp_path: Path) -> None:
    names = [m.name for m in TRAIN_MODELS]
    rc, rows = _run(tmp_path, ",".join(names))
    assert [r["case"] for r in rows] == names
    bad = {r["case"]: r.get("kernelscope") for r in rows if not is_ok(r)}
    assert not bad and rc == 0, bad
    for r in rows:
        needs = next(m.needs for m in TRAIN_MODELS if m.name == r["case"])
        if importlib.util.find_spec(needs) is None:
            assert "not installed" in r["skipped"]
            continue
        check = r["kernelscope"]["check"]
        assert check["ok"] and check["grads"] > 0  # every parameter's gradient compared
        assert r["eager"]["ms"] > 0 and r["kernelscope"]["ms"] > 0
        for label in ("eager", "kernelscope"):  # interleaved rounds, median and spread
            cell = r[label]
            lo, hi = cell["spread"]
            assert cell["rounds"] == ROUNDS and lo <= cell["ms"] <= hi, cell


def test_a_wrong_gradient_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check can fail: a backend whose graphs scale every result is flagged."""
    pytest.importorskip("transformers")
    import benchmarks.measure as measure

    def wrong(options: object = None) -> object:
        from torch._functorch.aot_autograd import aot_module_simplified

        def scaled(gm, inputs):  # type: ignore[no-untyped-def]
            return lambda *args: [t * 1.5 if t is not None and t.is_floating_point() else t
                                  for t in gm(*args)]

        return lambda gm, inputs: aot_module_simplified(gm, inputs, fw_compiler=scaled,
                                                        bw_compiler=scaled)

    monkeypatch.setattr(measure, "kernelscope", wrong)
    rc, rows = _run(tmp_path, "gpt2_small")
    assert rc == 1 and not rows[0]["kernelscope"]["check"]["ok"]


def test_reduce_overhead_columns_are_written_and_shown(tmp_path: Path) -> None:
    """--reduce-overhead adds Kernelscope with cuda_graphs (and Inductor's reduce-overhead):
    its cell is checked and timed, carries what the CUDA graphs did (none off the GPU), and
    the section's table shows the columns, from the run and from its --json file."""
    pytest.importorskip("transformers")
    out = tmp_path / "bench.json"
    argv = ["--device", "cpu", "--size", "smoke", "--only", "train", "--train-models",
            "gpt2_small", "--no-inductor", "--no-isolate", "--warmup", "1", "--rep", "3",
            "--reduce-overhead", "--json", str(out)]
    assert main([*argv, "--out", str(tmp_path / "perf.md")]) == 0
    row, = json.loads(out.read_text())["rows"]
    cell = row["kernelscope_cg"]
    assert cell["check"]["ok"] and cell["ms"] > 0, cell
    assert cell["cuda_graphs"] == {"graphs": 0, "recorded": 0, "replays": 0, "why_not": []}
    for text in ((tmp_path / "perf.md").read_text(), _render(out)):
        assert "| KS CUDA graphs ms |" in text and "0 of 0 recorded" in text, text


def _render(path: Path) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["--render", str(path)]) == 0
    return buf.getvalue()


def test_no_column_is_compiled_again_while_the_columns_are_timed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every column is compiled, then all are timed. A Dynamo reset before each column
    dropped the frames of the columns compiled before it, so each of those was compiled
    again inside its first timed round (and, with CUDA graphs, recorded again)."""
    pytest.importorskip("transformers")
    import benchmarks.timing as timing
    import kernelscope.compiler as ks

    events: list[str] = []
    compile_graph, time_columns = ks.backend, timing.interleaved

    def counted(gm: object, inputs: object, **kw: object) -> object:
        events.append("compile")
        return compile_graph(gm, inputs, **kw)  # type: ignore[arg-type]

    def timed(*args: object, **kw: object) -> object:
        events.append("timing")
        try:
            return time_columns(*args, **kw)  # type: ignore[arg-type]
        finally:
            events.append("timed")

    monkeypatch.setattr(ks, "backend", counted)
    monkeypatch.setattr(timing, "interleaved", timed)
    argv = ["--device", "cpu", "--size", "smoke", "--only", "train", "--train-models",
            "gpt2_small", "--no-inductor", "--no-isolate", "--warmup", "1", "--rep", "3",
            "--rounds", "2", "--reduce-overhead", "--out", "-"]
    assert main(argv) == 0
    start = events.index("timing")
    assert events[start:events.index("timed")] == ["timing"], events
    assert events[:start].count("compile") >= 2, events  # both Kernelscope columns compiled
