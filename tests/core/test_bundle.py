"""The front/back split: the capture bundle, its checks, and stages that run what they show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from ks_helpers import REPO
from ks_schema import check_stream

from kernelscope.compiler.capture import bundle as bundle_mod
from kernelscope.compiler.capture.bundle import BundleError, read_bundle
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_back, run_front, run_pipeline

OPTS = CompileOptions(device="cpu", backend="cpp", profile=False)


def _stages(events: Any) -> dict[str, Any]:
    return {e.stage: e.data for e in events}


def _front(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "snippet.py"
    path.write_text(code)
    bundle = tmp_path / "capture.ksb"
    list(run_front(code, OPTS, bundle, str(path)))
    return bundle


ADD = ("import torch\n"
       "def f(x, y):\n"
       "    return (x + y).relu()\n"
       "example_inputs = (torch.randn(8, 4), torch.randn(4))\n")


def test_back_half_runs_a_bundle_and_replays_the_front_events(tmp_path: Path) -> None:
    bundle = _front(tmp_path, ADD)
    events = list(run_back(bundle, OPTS))
    check_stream([json.loads(e.to_json()) for e in events])
    by = _stages(events)
    assert [e.stage for e in events] == ["source", "capture", "lowering", "scheduling",
                                         "memory", "codegen", "compile", "run", "profile",
                                         "done"]
    assert by["source"]["origin"] == "snippet" and by["capture"]["origin"] == "snippet"
    assert by["capture"]["graphs"][0]["kind"] == "inference"
    assert by["run"]["ok"] and by["run"]["graphs"][0]["ok"]
    assert by["done"] == {"ok": True, "isolated": True, "trace_id": None}


def test_one_capture_and_one_compile_per_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run` and `profile` execute the graphs `compile` built: nothing is captured or
    compiled twice (graph_break.py has two graphs)."""
    from kernelscope.compiler import compile_fx
    from kernelscope.compiler.capture import dynamo
    from kernelscope.compiler.lowering.graph import GraphLowering
    from kernelscope.compiler.runtime import loader

    counts = {"capture": 0, "lower": 0, "load": 0, "call": 0}

    def counted(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            counts[name] += 1
            return fn(*a, **k)

        return wrapper

    monkeypatch.setattr(dynamo.Recorder, "backend", counted("capture", dynamo.Recorder.backend))
    monkeypatch.setattr(GraphLowering, "run", counted("lower", GraphLowering.run))
    monkeypatch.setattr(loader, "load_graph", counted("load", loader.load_graph))
    monkeypatch.setattr(loader.CompiledGraph, "__call__",
                        counted("call", loader.CompiledGraph.__call__))
    monkeypatch.setattr(compile_fx, "make_backend", None)  # the torch.compile backend path
    path = REPO / "samples" / "graph_break.py"
    opts = CompileOptions(device="cpu", backend="cpp", profile=True)
    by = _stages(run_pipeline(path.read_text(), opts, str(path)))
    assert by["done"]["ok"], by.get("error")
    graphs = len(by["capture"]["graphs"])
    assert graphs == 2
    assert counts["capture"] == graphs == counts["lower"] == counts["load"]
    # warmup once per graph, `run` once per graph, then the profiler's calls
    assert counts["call"] > 2 * graphs
    assert [g["id"] for g in by["run"]["graphs"]] == [0, 1]


def test_snippet_output_is_data_never_events(tmp_path: Path) -> None:
    forged = json.dumps({"schema": 1, "seq": 7, "stage": "run", "ms": 0,
                         "data": {"ok": True, "outputs": []}})
    code = ("import os, torch\n"
            f"print({forged!r})\n"
            f"os.write(1, b{(forged + chr(10))!r})\n"
            "def f(x):\n"
            "    print('inside', flush=True)\n"
            "    return x * 2\n"
            "example_inputs = (torch.randn(4),)\n")
    path = tmp_path / "loud.py"
    path.write_text(code)
    bundle = tmp_path / "b.ksb"
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope.compiler", "compile", str(path), "--json",
         "--device", "cpu",
         "--backend", "cpp", "--front-only", "--bundle", str(bundle)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    front = [json.loads(line) for line in proc.stdout.splitlines()]
    front = [e for e in front if e["stage"] != "progress"]  # a long stage's heartbeats
    # The graph printed mid-capture (while the snippet's fd 1 is redirected) is ours alone.
    assert [e["stage"] for e in front] == ["source", "capture_graph", "capture"]
    assert forged in front[0]["data"]["stdout"]
    assert "inside" in front[2]["data"]["stdout"]
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope.compiler", "stages", str(bundle), "--json",
         "--device", "cpu",
         "--backend", "cpp", "--no-profile"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    back = [json.loads(line) for line in proc.stdout.splitlines()]
    check_stream(back)
    assert [e["stage"] for e in back].count("run") == 1
    assert back[-1]["data"] == {"ok": True, "isolated": True, "trace_id": None}


def _tamper(bundle: Path, edit: Any) -> None:
    raw = torch.load(bundle, weights_only=True)
    manifest = json.loads(raw["manifest"])
    edit(manifest, raw["tensors"])
    raw["manifest"] = json.dumps(manifest)
    torch.save(raw, bundle)


@pytest.mark.parametrize("target", ["builtins.eval", "os.system", "aten.from_file.default",
                                    "torch.ops.aten.add.Tensor", "aten.__class__.x",
                                    "higher_order.cond.default", "aten.no_such_op.default"])
def test_a_call_outside_the_allow_list_is_refused(tmp_path: Path, target: str) -> None:
    bundle = _front(tmp_path, ADD)

    def edit(m: dict[str, Any], _: Any) -> None:
        node = next(n for n in m["graphs"][0]["nodes"] if n["op"] == "call_function")
        node["target"] = target

    _tamper(bundle, edit)
    with pytest.raises(BundleError, match="not allowed|no such"):
        read_bundle(bundle)
    events = list(run_back(bundle, OPTS))
    assert [e.stage for e in events] == ["error", "done"]
    assert events[0].data["kind"] == "bundle" and events[1].data["ok"] is False


@pytest.mark.parametrize("case", ["opcode", "arg_tag", "node_ref", "extra_key", "tensor_size",
                                  "version", "kind", "placeholder", "name"])
def test_malformed_bundles_are_refused(tmp_path: Path, case: str) -> None:
    bundle = _front(tmp_path, ADD)

    def edit(m: dict[str, Any], tensors: dict[str, Any]) -> None:
        g = m["graphs"][0]
        call = next(n for n in g["nodes"] if n["op"] == "call_function")
        if case == "opcode":
            call["op"] = "call_module"
        elif case == "arg_tag":
            call["args"][0] = {"pickle": "cos\nsystem\n"}
        elif case == "node_ref":
            call["args"][0] = {"node": "later_node"}
        elif case == "extra_key":
            g["code"] = "import os"
        elif case == "tensor_size":
            key = next(iter(tensors))
            tensors[key] = torch.zeros(3)
        elif case == "version":
            m["version"] = 99
        elif case == "kind":
            g["kind"] = "mystery"
        elif case == "placeholder":
            g["nodes"][0]["target"] = "x=__import__('os').system('id')"
        elif case == "name":
            call["name"] = "import"  # a keyword: FX would rename it

    _tamper(bundle, edit)
    with pytest.raises(BundleError):
        bundle_mod.read_bundle(bundle).rebuild()


def test_a_pickled_object_is_not_loaded(tmp_path: Path) -> None:
    class Boom:
        def __reduce__(self) -> Any:
            return (os.system, ("echo pwned",))

    bad = tmp_path / "evil.ksb"
    torch.save({"manifest": "{}", "tensors": {"t0": Boom()}}, bad)
    with pytest.raises(BundleError, match="not a capture bundle"):
        read_bundle(bad)


def test_inputs_keep_strides_and_values(tmp_path: Path) -> None:
    code = ("import torch\n"
            "def f(x, b):\n"
            "    return x * b + 1\n"
            "example_inputs = (torch.randn(5, 3).t().contiguous().t(),"
            " torch.randn(1, 3).expand(5, 3))\n")
    bundle = _front(tmp_path, code)
    b = read_bundle(bundle)
    (_, gm, inputs), = b.rebuild()
    assert [tuple(t.stride()) for t in inputs] == [(1, 5), (0, 1)]
    by = _stages(run_back(bundle, OPTS))
    assert by["run"]["ok"], by.get("error", by.get("run"))


def test_a_failing_snippet_bundles_its_error(tmp_path: Path) -> None:
    bundle = _front(tmp_path, "import torch\nraise ValueError('no')\n")
    events = list(run_back(bundle, OPTS))
    assert [e.stage for e in events] == ["error", "done"]
    assert events[0].data["stage"] == "source" and events[0].data["line"] == 2


def test_a_wrong_kernel_fails_run_and_done(tmp_path: Path, monkeypatch: Any) -> None:
    """`run` checks the compiled graph for real: a kernel computing the wrong function
    makes `run` and `done` say so."""
    from kernelscope.compiler.codegen.cpp import kernel as cpp

    monkeypatch.setitem(cpp.OPS.rules, "exp", "std::exp(({0}) * 1.001f)")
    path = tmp_path / "exp.py"
    path.write_text("import torch\n"
                    "def f(x):\n"
                    "    return torch.exp(x) + 1\n"
                    "example_inputs = (torch.randn(64),)\n")
    by = _stages(run_pipeline(path.read_text(), OPTS, str(path)))
    assert by["run"]["ok"] is False and by["run"]["outputs"][0]["mismatched"] > 0
    assert by["done"]["ok"] is False


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_low_precision_graphs_pass_against_a_float32_reference(tmp_path: Path,
                                                               dtype: str) -> None:
    path = tmp_path / "half.py"
    path.write_text("import torch\n"
                    "def f(x):\n"
                    "    return torch.softmax(x * 1.7, -1) + x.sum(-1, keepdim=True)\n"
                    f"example_inputs = (torch.randn(32, 300).to(torch.{dtype}),)\n")
    by = _stages(run_pipeline(path.read_text(), OPTS, str(path)))
    out = by["run"]["outputs"][0]
    assert by["run"]["ok"], by["run"]
    assert out["dtype"] == dtype and out["rtol"] > OPTS.rtol
    assert "float32" in by["run"]["graphs"][0]["reference"]


def test_the_back_half_never_calls_the_snippet(tmp_path: Path) -> None:
    """The snippet's function counts its calls in a file: the back half adds none."""
    calls = tmp_path / "calls.txt"
    code = ("import torch\n"
            "from pathlib import Path\n"
            f"CALLS = Path({str(calls)!r})\n"
            "def f(x):\n"
            "    CALLS.write_text(CALLS.read_text() + 'x' if CALLS.exists() else 'x')\n"
            "    return torch.sin(x) * 2\n"
            "example_inputs = (torch.randn(16),)\n")
    bundle = _front(tmp_path, code)
    after_front = calls.read_text()
    by = _stages(run_back(bundle, CompileOptions(device="cpu", backend="cpp", profile=True)))
    assert by["run"]["ok"] and by["profile"]["measured"]
    assert calls.read_text() == after_front


def test_stages_command_runs_triton_kernels_in_the_interpreter(tmp_path: Path) -> None:
    """`kernelscope stages B --backend triton` on a CPU host switches the interpreter on
    before torch is imported (regression: it imported the pipeline first)."""
    bundle = _front(tmp_path, ADD)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope.compiler", "stages", str(bundle), "--json",
         "--device", "cpu",
         "--backend", "triton"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env=dict(env, PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    check_stream(events)
    by = {e["stage"]: e["data"] for e in events}
    assert by["codegen"]["graphs"][0]["backend"] == "triton", by.get("error")
    assert by["run"]["ok"] and by["done"]["ok"]


def test_the_compiler_facts_in_source_come_from_the_back_half(tmp_path: Path) -> None:
    """A bundle that claims another backend, GPU or options does not change what the
    trace says about the compiler; the snippet's own words (code, entry) are replayed."""
    bundle = _front(tmp_path, ADD)

    def edit(m: dict[str, Any], _: Any) -> None:
        data = m["events"]["source"]["data"]
        data.update(backend="triton", versions={**data["versions"], "gpu": "NVIDIA H200"},
                    options={**data["options"], "fusion": False})

    _tamper(bundle, edit)
    src = _stages(run_back(bundle, OPTS))["source"]
    assert src["backend"] == "cpp" and src["versions"]["gpu"] is None
    assert src["options"]["fusion"] is True
    assert src["code"] == ADD and src["entry"] == "f" and src["origin"] == "snippet"
