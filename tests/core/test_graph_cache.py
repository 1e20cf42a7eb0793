"""The whole-graph compile cache (compiler/runtime/graph_cache.py).

A warm compile of a graph compiled before skips lowering..codegen and gives the cold
compile's outputs; whatever changes the output (an option, a shape, a stride, a dtype, the
compiler's source) changes the key; an entry that does not verify is rebuilt; the
`compile` event says what the cache did.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from ks_helpers import REPO

from kernelscope.compiler.compile_fx import make_backend
from kernelscope.compiler.lowering.graph import GraphLowering
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline
from kernelscope.compiler.runtime import graph_cache


def softmax_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x * y, -1).sum(0) + 1


def norm_gelu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x = torch.nn.functional.layer_norm(x, (x.shape[-1],), w)
    return torch.nn.functional.gelu(x @ w.unsqueeze(1).expand(-1, 8)).cos()


def two_graphs(x: torch.Tensor) -> torch.Tensor:
    y = (x * 2).sin()
    torch._dynamo.graph_break()
    return (y + x).amax(0)


def with_constant(x: torch.Tensor) -> torch.Tensor:
    return (x * torch.tensor([1.5, -2.0, 3.0])).exp()  # a tensor the graph holds


def with_scalar_constant(x: torch.Tensor) -> torch.Tensor:
    return x * torch.tensor(2.5) - 1  # a 0-d tensor constant (it has no byte view)


def repeated_layers(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    for _ in range(3):  # three kernels with one body, each before a matmul
        x = torch.tanh(x * 1.5 + 0.25) @ w
    return x


CASES: list[tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = [
    (softmax_sum, lambda: (torch.randn(8, 33), torch.randn(33))),
    (norm_gelu, lambda: (torch.randn(16, 24), torch.randn(24))),
    (two_graphs, lambda: (torch.randn(5, 7),)),
    (with_constant, lambda: (torch.randn(4, 3),)),
    (with_scalar_constant, lambda: (torch.randn(4, 3),)),
    (repeated_layers, lambda: (torch.randn(6, 8), torch.randn(8, 8) / 3)),
]


def compile_run(fn: Callable[..., Any], args: tuple[Any, ...], cache: Path,
                grad: bool = False, **opts: Any) -> tuple[Any, list[str]]:
    """fn compiled afresh (Dynamo reset) and run: its output and each graph's cache status."""
    torch._dynamo.reset()
    sink: list[Any] = []
    options = CompileOptions(cache_dir=str(cache), **opts)
    with torch.set_grad_enabled(grad):
        out = torch.compile(fn, backend=make_backend(options, sink=sink))(*args)
    return out, [c.graph_cache["status"] for c in sink]


@pytest.fixture
def aot_traces(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts AOTAutograd traces (a warm inference compile of a plain graph runs none)."""
    count = [0]
    from kernelscope.compiler.capture import aot as aot_module

    aot = aot_module.aot_module_simplified

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return aot(*args, **kwargs)

    monkeypatch.setattr(aot_module, "aot_module_simplified", counted)
    return count


@pytest.fixture
def lowerings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts graphs lowered (a cache hit lowers none)."""
    count = [0]
    run = GraphLowering.run

    def counted(self: GraphLowering) -> Any:
        count[0] += 1
        return run(self)

    monkeypatch.setattr(GraphLowering, "run", counted)
    return count


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].__name__)
def test_a_warm_compile_is_a_hit_with_the_cold_outputs(
        case: Any, grad: bool, tmp_path: Path, lowerings: list[int],
        aot_traces: list[int]) -> None:
    fn, make = case
    args = make()
    cold, first = compile_run(fn, args, tmp_path, grad)
    lowered_cold, traced_cold = lowerings[0], aot_traces[0]
    warm, second = compile_run(fn, args, tmp_path, grad)
    assert first and set(first) == {"miss"}
    assert second == ["hit"] * len(first)
    assert lowerings[0] == lowered_cold  # nothing lowered again
    # Without grad, a graph that holds no constant skips AOTAutograd too.
    skips = not grad and fn not in (with_constant, with_scalar_constant)
    assert aot_traces[0] == traced_cold + (0 if skips else traced_cold)
    assert torch.equal(warm, cold)
    torch.testing.assert_close(warm, fn(*args), atol=1e-5, rtol=1e-5)


def mutates(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.add_(y)
    return (x * 2).sum(0)


def aliases(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (x * y).cos(), x.t()


@pytest.mark.parametrize("fn", [mutates, aliases])
def test_what_aotautograd_does_at_run_time_keeps_it_warm(
        fn: Callable[..., Any], tmp_path: Path, aot_traces: list[int]) -> None:
    """A graph that mutates an input or returns a view of one needs AOTAutograd's runtime
    (the copy back, the view): its warm compile traces again, and behaves like eager."""
    x, y = torch.randn(6, 5), torch.randn(5)
    compile_run(fn, (x.clone(), y), tmp_path)
    traced = aot_traces[0]
    got_x = x.clone()
    out, status = compile_run(fn, (got_x, y), tmp_path)
    assert status == ["hit"] and aot_traces[0] == 2 * traced
    want_x = x.clone()
    want = fn(want_x, y)
    torch.testing.assert_close(got_x, want_x)
    torch.testing.assert_close(out, want)
    if fn is aliases:
        assert out[1].data_ptr() == got_x.data_ptr()  # still a view of the input


@pytest.mark.parametrize("change", ["option", "shape", "stride", "dtype", "source"])
def test_what_changes_the_output_misses(change: str, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    x, y = torch.randn(8, 33), torch.randn(33)
    compile_run(softmax_sum, (x, y), tmp_path)
    opts: dict[str, Any] = {}
    if change == "option":
        opts["fusion"] = False
    elif change == "shape":
        x = torch.randn(9, 33)
    elif change == "stride":
        x = torch.randn(33, 8).t()
    elif change == "dtype":
        x, y = x.double(), y.double()
    else:
        monkeypatch.setattr(graph_cache, "compiler_source_hash", lambda: "edited")
    out, status = compile_run(softmax_sum, (x, y), tmp_path, **opts)
    assert status == ["miss"]
    torch.testing.assert_close(out, softmax_sum(x, y), atol=1e-5, rtol=1e-5)


def _one(tmp_path: Path, pattern: str) -> Path:
    (path,) = tmp_path.glob(pattern)
    return path


@pytest.mark.parametrize("damage", ["entry", "wrapper", "library"])
def test_a_damaged_entry_is_detected_and_rebuilt(damage: str, tmp_path: Path) -> None:
    args = (torch.randn(8, 33), torch.randn(33))
    cold, _ = compile_run(softmax_sum, args, tmp_path)
    if damage == "entry":
        _one(tmp_path, "fxgraph_*.json").write_text("{not json")
    elif damage == "wrapper":
        wrapper = _one(tmp_path, "graph_*.py")
        good = wrapper.read_text()
        # A wrapper that returns zeros: imported unverified, the output would be wrong.
        wrapper.write_text(good.replace("def call(args):",
                                        "def call(args):\n    return (torch.zeros(33),)\n"
                                        "def _unused(args):"))
        sys.modules.pop(f"kernelscope_{wrapper.stem}", None)
    else:
        lib = _one(tmp_path, "kernels_*.so")
        lib.unlink()  # a new file: this process still maps the library it loaded
        lib.write_bytes(b"not a library")
    out, status = compile_run(softmax_sum, args, tmp_path)
    assert status == ["stale"]
    assert torch.equal(out, cold)
    if damage == "wrapper":
        assert _one(tmp_path, "graph_*.py").read_text() == good
    if damage == "library":
        assert _one(tmp_path, "kernels_*.so").read_bytes()[:4] == b"\x7fELF"
    assert compile_run(softmax_sum, args, tmp_path)[1] == ["hit"]


def test_a_graph_that_calls_a_python_function_is_not_cached() -> None:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(softmax_sum, (x, x)))  # its code names only the function
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    key, why = graph_cache.graph_key(gm, [torch.randn(3)], CompileOptions(), {}, {})
    assert key is None and "calls" in why


def test_the_compile_event_reports_the_graph_cache(tmp_path: Path) -> None:
    code = (REPO / "samples" / "add_relu.py").read_text()
    options = CompileOptions(cache_dir=str(tmp_path), profile=False)

    def statuses() -> list[str]:
        events = [e for e in run_pipeline(code, options) if e.stage == "compile"]
        return [g["graph_cache"]["status"] for g in events[0].data["graphs"]]

    assert statuses() == ["miss"]
    assert statuses() == ["hit"]
    entry = json.loads(_one(tmp_path, "fxgraph_*.json").read_text())
    assert entry["backend"] == "cpp" and entry["kernels"]


INTERPRETED = """
import sys, torch
sys.path.insert(0, {tests!r})
from test_graph_cache import CASES, compile_run
from pathlib import Path
for fn, make in CASES:
    args = make()
    cold, first = compile_run(fn, args, Path({cache!r}), backend="triton")
    warm, second = compile_run(fn, args, Path({cache!r}), backend="triton")
    ok = torch.equal(cold, warm) and torch.allclose(warm, fn(*args), atol=1e-5, rtol=1e-5)
    print(fn.__name__, ",".join(first), ",".join(second), ok)
"""


def test_the_interpreter_path_hits_with_the_same_outputs(tmp_path: Path) -> None:
    script = INTERPRETED.format(tests=str(Path(__file__).parent), cache=str(tmp_path))
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert len(rows) == len(CASES)
    for name, first, second, ok in rows:
        assert set(first.split(",")) == {"miss"}, name
        assert set(second.split(",")) == {"hit"}, name
        assert ok == "True", name
