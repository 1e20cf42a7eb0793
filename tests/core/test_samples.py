"""Every sample through the whole pipeline, against eager: C++ in this process, Triton
under the interpreter in a subprocess (TRITON_INTERPRET must be set before Triton loads),
and every event checked against the schema in docs/events.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import variety
from ks_helpers import REPO, SAMPLES
from ks_schema import check_stream

from kernelscope.compiler.events.stage import PARTS, STAGES
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline

IDS = [p.stem for p in SAMPLES]


def _events(path: Path, **opts: Any) -> list[dict[str, Any]]:
    options = CompileOptions(device="cpu", backend="cpp", profile=False, **opts)
    return [json.loads(e.to_json()) for e in run_pipeline(path.read_text(), options, str(path))]


@pytest.mark.parametrize("path", SAMPLES, ids=IDS)
def test_sample_on_cpp_matches_eager(path: Path) -> None:
    events = _events(path)
    check_stream(events)
    by_stage = {e["stage"]: e["data"] for e in events}
    assert "error" not in by_stage, by_stage.get("error")
    # Every stage once, in order; each captured graph streamed ahead of `capture` too.
    assert [e["stage"] for e in events if e["stage"] not in PARTS] == [*STAGES, "done"]
    assert [e["stage"] for e in events].count("capture_graph") == len(by_stage["capture"]["graphs"])
    assert by_stage["run"]["ok"], by_stage["run"]
    assert by_stage["done"]["ok"]


def test_samples_through_the_triton_interpreter() -> None:
    """One subprocess for all samples: each runs the CLI's pipeline with --backend triton."""
    script = (
        "import json, sys\n"
        "from kernelscope.compiler.options import CompileOptions\n"
        "from kernelscope.compiler.pipeline import run_pipeline\n"
        "for path in sys.argv[1:]:\n"
        "    opts = CompileOptions(device='cpu', backend='triton', profile=False)\n"
        "    for e in run_pipeline(open(path).read(), opts, path):\n"
        "        print(e.to_json(), flush=True)\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", script, *map(str, SAMPLES)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    runs: list[dict[str, Any]] = []
    current: list[dict[str, Any]] = []
    for e in events:
        current.append(e)
        if e["stage"] == "done":
            runs.append({x["stage"]: x["data"] for x in current})
            check_stream(current)
            current = []
    assert len(runs) == len(SAMPLES)
    failures = {p.stem: r.get("error", r.get("run")) for p, r in zip(SAMPLES, runs)
                if not r.get("run", {}).get("ok")}
    assert not failures, failures
    for r in runs:
        assert r["codegen"]["graphs"][0]["backend"] == "triton"
        assert r["source"]["triton_interpret"] is True
        assert r["profile"]["measured"] is False


def test_fallback_ops_are_reported_and_still_correct(tmp_path: Path) -> None:
    snippet = tmp_path / "sorted.py"
    snippet.write_text(
        "import torch\n"
        "def f(x):\n"
        "    q, r = torch.linalg.qr(x)\n"
        "    return q * 2 + r.sum()\n"
        "example_inputs = (torch.randn(4, 9),)\n"
    )
    by_stage = {e["stage"]: e["data"] for e in _events(snippet)}
    fallbacks = by_stage["lowering"]["graphs"][0]["fallbacks"]
    assert [f["op"] for f in fallbacks] == ["aten.linalg_qr.default"]
    assert fallbacks[0]["line"] == 3
    assert by_stage["run"]["ok"]


def test_graph_break_gives_two_graphs_and_a_reason() -> None:
    path = REPO / "samples" / "graph_break.py"
    by_stage = {e["stage"]: e["data"] for e in _events(path)}
    assert len(by_stage["capture"]["graphs"]) == 2
    breaks = by_stage["capture"]["graph_breaks"]
    assert breaks and breaks[0]["reason"] and breaks[0]["line"]


def test_provenance_reaches_kernel_lines() -> None:
    path = REPO / "samples" / "add_relu.py"
    events = _events(path)
    by_stage = {e["stage"]: e["data"] for e in events}
    code_lines = by_stage["source"]["code"].splitlines()
    add_line = next(i + 1 for i, t in enumerate(code_lines) if "x + y" in t)
    kernel = by_stage["codegen"]["graphs"][0]["kernels"][0]
    src = kernel["source"].splitlines()
    hits = [e for e in kernel["line_map"] if add_line in e["lines"]]
    assert hits, kernel["line_map"]
    assert any("+" in src[e["line"] - 1] for e in hits)
    nodes = by_stage["capture"]["graphs"][0]["nodes"]
    assert any(n["line"] == add_line and n["target"] == "aten.add.Tensor" for n in nodes)


def test_a_kernel_that_fails_to_build_is_named(tmp_path: Path, monkeypatch: Any) -> None:
    """A broken C++ kernel: the error event is a build error that names the kernel."""
    from kernelscope.compiler.codegen.cpp import kernel as cpp

    monkeypatch.setitem(cpp.OPS.rules, "exp", "std::no_such_function({0})")
    snippet = tmp_path / "exp.py"
    snippet.write_text("import torch\n"
                       "def f(x):\n"
                       "    return torch.exp(x) + 1\n"
                       "example_inputs = (torch.randn(8),)\n")
    by_stage = {e["stage"]: e["data"] for e in _events(snippet)}
    err = by_stage["error"]
    assert err["stage"] == "compile" and err["kind"] == "build"
    assert err["kernel"] == "cpp_poi_fused_exp_add_0"
    assert "no_such_function" in err["traceback"]
    assert by_stage["done"]["ok"] is False


@pytest.mark.parametrize("case", sorted(variety.CASES))
def test_variety_on_cpp(case: str) -> None:
    assert variety.check(case, "cpp") == "ok"


def test_variety_under_the_triton_interpreter() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, variety.__file__, "triton"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert set(results) == set(variety.CASES) - variety.NO_INTERPRETER
    assert all(r == "ok" for r in results.values()), results
