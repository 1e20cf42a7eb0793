"""The Triton GEMM template: lowering offers it, the choice is data, epilogues fuse, and
the template computes what eager does (under the Triton interpreter, in a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from gemm_cases import CASES
from ks_helpers import interpreter_case_results

from kernelscope.compiler.capture.dynamo import Recorder
from kernelscope.compiler.codegen.triton.backend import TritonBackend
from kernelscope.compiler.compile_fx import (
    codegen_stage,
    lower,
    memory_stage,
    schedule_stage,
)
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.ir.nodes import ExternKernel
from kernelscope.compiler.ir.template import MatmulTemplate
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime import autotune, template_bench

HERE = Path(__file__).resolve().parent


def _addmm_gelu(x: Any, w: Any, b: Any) -> Any:
    return F.gelu(torch.addmm(b, x, w))


def _inputs() -> tuple[torch.Tensor, ...]:
    return torch.randn(37, 50), torch.randn(50, 70), torch.randn(70)


def _works(fn: Any, args: tuple[Any, ...], **options: Any) -> list[GraphWork]:
    rec = Recorder()
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=rec.backend)(*args)
    works = []
    for i, g in enumerate(rec.graphs):
        work = GraphWork(i, g.gm, g.example_inputs, CompileOptions(**options))
        works.append(work)
    return works


def _through_codegen(work: GraphWork) -> Any:
    lower(work)
    event = schedule_stage(work)
    memory_stage(work)
    return event, codegen_stage(work)


def test_cpp_keeps_the_extern_call() -> None:
    (work,) = _works(_addmm_gelu, _inputs(), backend="cpp")
    lower(work)
    assert work.lowered is not None
    products = [b for b in work.lowered.buffers if isinstance(b, ExternKernel)]
    assert products and not any(isinstance(b, MatmulTemplate) for b in products)


def test_forced_template_fuses_the_epilogue_and_says_so() -> None:
    (work,) = _works(_addmm_gelu, _inputs(), backend="triton", matmul="template")
    sched, code = _through_codegen(work)
    (sel,) = sched.templates
    assert sel.chosen != "extern" and "matmul option" in sel.reason
    assert sel.choices[0].name == "extern" and len(sel.choices) > 1
    (kernel,) = [k for k in sched.kernels if k.kind == "template"]
    assert sel.kernel == kernel.name and kernel.name.startswith("triton_tem_fused_addmm")
    assert {"addmm", "erf"} <= set(kernel.origins)  # the FX nodes fused into it
    fused = [d for d in sched.decisions if d.fused and "template's epilogue" in d.reason]
    assert fused
    (source,) = [k.source for k in code.kernels if k.name == kernel.name]
    assert "tl.dot(a, b, acc" in source and "GROUP_M: tl.constexpr" in source
    assert "tl.erf(" in source  # the epilogue, from the same inner_fn codegen
    assert not any(k.name.startswith("triton_poi") for k in code.kernels)
    # the wrapper never calls ATen's product: the template computes it
    assert "aten.addmm" not in work.wrapper and "aten.mm" not in work.wrapper


def test_auto_on_an_emulated_backend_keeps_the_extern_call() -> None:
    (work,) = _works(_addmm_gelu, _inputs(), backend="triton")
    sched, code = _through_codegen(work)
    (sel,) = sched.templates
    assert sel.chosen == "extern" and "emulated" in sel.reason
    assert not any(k.kind == "template" for k in sched.kernels)
    assert "torch.ops.aten.mm.default(" in work.wrapper


def test_extern_option_offers_no_template() -> None:
    (work,) = _works(_addmm_gelu, _inputs(), backend="triton", matmul="extern")
    sched, _ = _through_codegen(work)
    assert sched.templates == []


def test_a_transposed_read_is_not_an_epilogue() -> None:
    fn, make, _ = CASES["transposed_consumer_f32"]
    (work,) = _works(fn, make(), backend="triton", matmul="template")
    sched, _ = _through_codegen(work)
    refused = [d for d in sched.decisions if not d.fused and "another element" in d.reason]
    assert refused


def _measured_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, times: dict[str, float]
                    ) -> tuple[list[Any], list[int]]:
    """select_templates as on a GPU, with the measurement replaced by `times` (what a GPU
    would have measured; the choice and the cache are under test, not the timing)."""
    options = CompileOptions(backend="triton", matmul="auto", cache_dir=str(tmp_path))
    calls: list[int] = []
    built: list[list[str]] = []
    sentinel: dict[Any, Any] = {("planted", "module"): None}

    def fake_precompile(bufs: list[MatmulTemplate], backend: Any, workers: int
                        ) -> tuple[Any, dict[str, Any]]:
        built.append([b.name for b in bufs])
        return sentinel, {}

    def fake_measure(buf: MatmulTemplate, backend: Any, modules: Any = None
                     ) -> dict[str, Any]:
        assert modules is sentinel  # measured with the candidates built beforehand
        calls.append(1)
        return {"ms": {name: ms for name, ms in times.items()},
                "errors": {c.name: "ValueError: values differ" for c in buf.configs[2:]}}

    monkeypatch.setattr(template_bench, "precompile", fake_precompile)
    monkeypatch.setattr(template_bench, "measure", fake_measure)
    (work,) = _works(_addmm_gelu, _inputs(), backend="triton")
    lower(work)
    assert work.lowered is not None
    backend = TritonBackend("cuda", options)  # not emulated: it measures
    first = autotune.select_templates(work.lowered, backend, options)
    for buf in work.lowered.buffers:
        if isinstance(buf, MatmulTemplate):
            buf.chosen = None
    second = autotune.select_templates(work.lowered, backend, options)
    # Built once, all pending products together, before measuring; not again when cached.
    assert built == [[b.name for b in work.lowered.buffers if isinstance(b, MatmulTemplate)]]
    return [first[0], second[0]], calls


def test_measured_choice_is_the_fastest_and_cached(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.compiler.codegen.triton.template import configs_for

    best = configs_for(37, 70, 50)[1].name
    sels, calls = _measured_graph(tmp_path, monkeypatch, {"extern": 0.02, best: 0.01})
    first, second = sels
    assert first.chosen == best and not first.cache_hit
    assert second.chosen == best and second.cache_hit and calls == [1]  # measured once
    times = {c.name: c.ms for c in first.choices}
    assert times["extern"] == 0.02 and times[best] == 0.01
    assert any(c.error for c in first.choices)  # dropped configs say why
    (entry,) = list((tmp_path / "results").glob("mm_*.json"))
    assert json.loads(entry.read_text())["ms"][best] == 0.01


def test_measured_extern_wins_ties(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.compiler.codegen.triton.template import configs_for

    name = configs_for(37, 70, 50)[0].name
    (first, _), _ = _measured_graph(tmp_path, monkeypatch, {"extern": 0.01, name: 0.01})
    assert first.chosen == "extern" and "extern call is fastest" in first.reason


@pytest.fixture(scope="module")
def interpreter_results() -> dict[str, str]:
    return interpreter_case_results(HERE / "gemm_cases.py")


@pytest.mark.parametrize("name", sorted(CASES))
def test_template_matches_eager_under_the_interpreter(name: str,
                                                     interpreter_results: dict[str, str]
                                                     ) -> None:
    assert interpreter_results.get(name) == "ok", interpreter_results.get(name, "crashed")


def test_precompile_loads_every_candidate_and_never_raises(tmp_path: Path) -> None:
    # On this CPU host the builds themselves fail (no GPU driver): precompile reports
    # that and leaves each candidate to measure, which builds it again and says why.
    options = CompileOptions(backend="triton", matmul="auto", cache_dir=str(tmp_path))
    (work,) = _works(_addmm_gelu, _inputs(), backend="triton")
    lower(work)
    assert work.lowered is not None
    backend = TritonBackend("cuda", options)
    bufs = [b for b in work.lowered.buffers if isinstance(b, MatmulTemplate)]
    for buf in bufs:
        buf.configs = tuple(backend.template_configs(*buf.mnk, buf.dtype))
    modules, info = template_bench.precompile(bufs, backend, 2)
    assert set(modules) == {(b.name, c.name) for b in bufs for c in b.configs}
    assert info["candidates"] == len(modules)
    for kernel, module in modules.values():
        assert callable(module.run) and kernel.name in module.__dict__


def test_measured_times_reach_a_later_job_through_the_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 1's back half measures; the server takes its times (server/jobs/kcache.py) and
    links them into job 2's own cache: job 2 measures and builds nothing and makes the
    same choice. A forged entry in job 2's own cache (a snippet's) is not read."""
    from types import SimpleNamespace

    from kernelscope.compiler.codegen.triton.template import configs_for
    from kernelscope.server.jobs.kcache import KernelCache, job_cache

    best = configs_for(37, 70, 50)[1].name
    measured: list[str] = []

    def fake_measure(buf: MatmulTemplate, backend: Any, modules: Any = None) -> dict[str, Any]:
        measured.append(buf.name)
        return {"ms": {"extern": 0.02, best: 0.01}, "errors": {}}

    def fake_precompile(bufs: Any, *_: Any) -> tuple[dict[Any, Any], dict[str, Any]]:
        measured.append("built")
        return {}, {}

    monkeypatch.setattr(template_bench, "precompile", fake_precompile)
    monkeypatch.setattr(template_bench, "measure", fake_measure)

    def job(scratch: Path) -> Any:
        options = CompileOptions(backend="triton", matmul="auto",
                                 cache_dir=str(job_cache(scratch)))
        (work,) = _works(_addmm_gelu, _inputs(), backend="triton")
        lower(work)
        assert work.lowered is not None
        return autotune.select_templates(work.lowered, TritonBackend("cuda", options),
                                         options)[0]

    settings = SimpleNamespace(isolation=SimpleNamespace(mode="bubblewrap", uid=None,
                                                         bubblewrap=True))
    kcache = KernelCache(tmp_path / "shared", settings)
    first = job(tmp_path / "job1")
    assert first.chosen == best and not first.cache_hit and measured == ["built", "buf0"]
    assert kcache.promote(tmp_path / "job1", results=True).results == 1
    kcache.link_into(tmp_path / "job2")
    second = job(tmp_path / "job2")
    assert second.chosen == best and second.cache_hit and len(measured) == 2
    assert [c.ms for c in second.choices] == [c.ms for c in first.choices]

    # A job without the shared entry, whose own cache holds a forged one under the same
    # name (a front half's, never promoted): the server takes nothing from it.
    forged_job = tmp_path / "job3"
    (job_cache(forged_job) / "results").mkdir(parents=True)
    for entry in (job_cache(tmp_path / "job1") / "results").glob("mm_*.json"):
        (job_cache(forged_job) / "results" / entry.name).write_text(
            json.dumps({"ms": {"extern": 0.0001}, "errors": {}}))
    other = KernelCache(tmp_path / "shared2", settings)
    assert other.promote(forged_job).results == 0
    assert not list(other.results.iterdir())


def test_by_default_nothing_is_timed_and_a_measured_choice_is_reused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """matmul="heuristic" (the default, as Inductor without max-autotune): no candidate is
    built or timed; the extern call, unless a measuring job cached a choice for the same
    product, which is then taken as it was measured."""
    from kernelscope.compiler.codegen.triton.template import configs_for

    assert CompileOptions().matmul == "heuristic"
    timed: list[str] = []

    def fail(*args: Any, **kwargs: Any) -> Any:
        timed.append("called")
        raise AssertionError("the heuristic times nothing")

    def select(matmul: str) -> Any:
        options = CompileOptions(backend="triton", matmul=matmul, cache_dir=str(tmp_path))
        (work,) = _works(_addmm_gelu, _inputs(), backend="triton")
        lower(work)
        assert work.lowered is not None
        return autotune.select_templates(work.lowered, TritonBackend("cuda", options),
                                         options)[0]

    monkeypatch.setattr(template_bench, "precompile", fail)
    monkeypatch.setattr(template_bench, "measure", fail)
    cold = select("heuristic")
    assert cold.chosen == "extern" and not cold.cache_hit and "not measured" in cold.reason
    best = configs_for(37, 70, 50)[1].name
    monkeypatch.setattr(template_bench, "precompile", lambda bufs, *a: ({}, {}))
    monkeypatch.setattr(template_bench, "measure", lambda buf, backend, modules=None: {
        "ms": {"extern": 0.02, best: 0.01}, "errors": {}})
    assert select("measure").chosen == best
    monkeypatch.setattr(template_bench, "precompile", fail)
    monkeypatch.setattr(template_bench, "measure", fail)
    warm = select("heuristic")
    assert warm.chosen == best and warm.cache_hit and "measured before" in warm.reason
    assert not timed
