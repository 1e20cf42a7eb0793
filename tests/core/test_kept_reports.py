"""A repeated compile of a cached graph builds nothing and reports nothing again: each
kernel's build report (objdump's assembly, Triton's stages) is kept on disk by what it
depends on (runtime/loader.py, runtime/results.py), so the `compile` event of the second
compile marks every kernel a cache hit with the first compile's report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from ks_helpers import REPO

from kernelscope.compiler.codegen.cpp.kernel import CppBackend
from kernelscope.compiler.codegen.triton.backend import TritonBackend
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline


def _compile(code: str, options: CompileOptions) -> dict[str, Any]:
    events = {e.stage: e for e in run_pipeline(code, options)}
    assert events["run"].data["ok"], events["run"].data
    graph: dict[str, Any] = events["compile"].data["graphs"][0]
    return graph


def test_a_repeated_compile_builds_and_reports_nothing(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    code = (REPO / "samples" / "softmax.py").read_text()
    options = CompileOptions(cache_dir=str(tmp_path), profile=False, backend="cpp")
    first = _compile(code, options)
    assert not any(k["cache_hit"] for k in first["kernels"])

    def no_report(self: Any, module: Any, kernel: str) -> dict[str, Any]:
        raise AssertionError(f"{kernel} reported again")

    monkeypatch.setattr(CppBackend, "kernel_report", no_report)
    second = _compile(code, options)
    assert second["cache_hit"] and second["build_ms"] == 0
    assert second["kernels"] and all(k["cache_hit"] for k in second["kernels"])
    assert [k["ir"] for k in second["kernels"]] == [k["ir"] for k in first["kernels"]]
    assert [k["line_maps"] for k in second["kernels"]] == \
        [k["line_maps"] for k in first["kernels"]]


def test_a_report_with_a_note_is_made_again(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    code = (REPO / "samples" / "add_relu.py").read_text()
    options = CompileOptions(cache_dir=str(tmp_path), profile=False, backend="cpp")
    calls: list[str] = []

    def noted(self: Any, module: Any, kernel: str) -> dict[str, Any]:
        calls.append(kernel)
        return {"stages_note": "objdump failed"}

    monkeypatch.setattr(CppBackend, "kernel_report", noted)
    _compile(code, options)
    second = _compile(code, options)
    assert len(calls) == 2 * len(second["kernels"])
    assert not any(k["cache_hit"] for k in second["kernels"])


def test_triton_keys_a_report_by_the_launch_specialization() -> None:
    backend = TritonBackend("cuda", CompileOptions(backend="triton"))
    base = torch.zeros(64)
    aligned = ((base, base[4:], 64), {"XBLOCK": 32})
    moved = ((base[8:], base[12:], 64), {"XBLOCK": 32})  # other addresses, same alignment
    unaligned = ((base[1:], base[4:], 64), {"XBLOCK": 32})
    facts = backend.report_facts
    assert facts(aligned) == facts(moved)
    assert facts(aligned) != facts(unaligned)
    assert facts(aligned) != facts(((base.half(), base[4:], 64), {"XBLOCK": 32}))
    assert facts(aligned) != facts(((base, base[4:], 65), {"XBLOCK": 32}))
    assert facts(aligned) != facts(((base, base[4:], 64), {"XBLOCK": 64}))


def test_gpu_reports_are_made_in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kernel's report runs nvdisasm (a subprocess): the kernels' reports overlap.
    Two reports wait for each other at a barrier, which one thread would never pass."""
    import threading
    import types

    from kernelscope.compiler.codegen.triton import backend as triton_backend

    barrier = threading.Barrier(2, timeout=30)

    def report(fn: Any) -> dict[str, Any]:
        barrier.wait()
        return {"num_warps": fn}

    monkeypatch.setattr(triton_backend, "compiled_report", report)
    backend = TritonBackend("cuda", CompileOptions(backend="triton", compile_workers=2))
    module = types.SimpleNamespace(k0=4, k1=8)
    reports = backend.kernel_reports(module, {"k0": None, "k1": None})  # type: ignore[arg-type]
    assert reports == {"k0": {"num_warps": 4}, "k1": {"num_warps": 8}}
