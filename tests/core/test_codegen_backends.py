"""Backend objects: chosen once per graph from its device, asked everything per target."""

from __future__ import annotations

import re
import types
from typing import Any

import pytest
import torch
from ks_helpers import REPO, lower_fn

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.codegen.backends import REGISTRY, choose_backend
from kernelscope.compiler.codegen.cpp import kernel as cpp_module
from kernelscope.compiler.codegen.cpp.kernel import CppBackend
from kernelscope.compiler.codegen.triton.backend import TritonBackend
from kernelscope.compiler.codegen.triton.report import compiled_report
from kernelscope.compiler.compile_fx import (
    codegen_stage,
    lower,
    memory_stage,
    schedule_stage,
)
from kernelscope.compiler.events.types import to_json
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.kinds import KernelKind

OPTS = CompileOptions()


@pytest.mark.parametrize(("requested", "device", "cls", "emulated"), [
    ("auto", "cpu", CppBackend, False),
    ("auto", "cuda", TritonBackend, False),
    ("cpp", "cpu", CppBackend, False),
    ("triton", "cuda", TritonBackend, False),
    ("triton", "cpu", TritonBackend, True),  # asked for: the Triton interpreter
])
def test_backend_follows_the_device(requested: str, device: str, cls: type,
                                    emulated: bool) -> None:
    backend = choose_backend(requested, device, OPTS)
    assert type(backend) is cls and backend.device == device
    assert backend.emulated is emulated


def test_impossible_or_unknown_backends_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="C\\+\\+ backend cannot run on 'cuda'.*triton"):
        choose_backend("cpp", "cuda", OPTS)
    with pytest.raises(ValueError, match="unknown backend 'llvm'"):
        choose_backend("llvm", "cpu", OPTS)
    with pytest.raises(ValueError, match="no backend"):
        choose_backend("auto", "mps", OPTS)


def test_registry_implements_every_target_row_in_order() -> None:
    assert targets.names() == list(REGISTRY)
    for name, cls in REGISTRY.items():
        assert cls.target is targets.by_name(name) and cls.name == name
    assert targets.choices() == ["auto", *targets.names()]


@pytest.mark.parametrize(("requested", "device", "env"), [
    ("triton", "cpu", {"TRITON_INTERPRET": "1"}),  # emulated: the interpreter's switch
    ("triton", "cuda", {}), ("auto", "cpu", {}), ("auto", "cuda", {}), ("cpp", "cpu", {}),
    ("cpp", "cuda", {}),  # not a valid pair: the compile says so, not the environment
])
def test_the_emulator_environment_comes_from_the_target_table(requested: str, device: str,
                                                              env: dict[str, str]) -> None:
    assert targets.emulator_env(requested, device) == env
    assert targets.emulation_env("cpu") == {"TRITON_INTERPRET": "1"}
    assert targets.emulation_env("cuda") == {}


def test_kernel_prefixes_come_from_the_backend() -> None:
    triton, cpp = choose_backend("triton", "cpu", OPTS), choose_backend("cpp", "cpu", OPTS)
    assert triton.kernel_prefix(KernelKind.POINTWISE, 1) == "triton_poi"
    assert triton.kernel_prefix(KernelKind.REDUCTION, 4096) == "triton_per"
    assert triton.kernel_prefix(KernelKind.REDUCTION, 4097) == "triton_red"
    assert cpp.kernel_prefix(KernelKind.REDUCTION, 10) == "cpp_red"


def test_every_kernel_kind_answers_what_the_compiler_asks() -> None:
    """A new kind is one member of KernelKind: its name part, its rank in a fused group
    and whether it is generated or reduces are answered for each member."""
    for kind in KernelKind:
        assert kind.short and isinstance(kind.generated, bool) and isinstance(kind.reduces, bool)
        assert KernelKind.of_group([kind]) is kind
    assert KernelKind.of_group([KernelKind.POINTWISE, KernelKind.REDUCTION]) \
        is KernelKind.REDUCTION
    assert KernelKind.of_group([KernelKind.REDUCTION, KernelKind.EXTERN]) is KernelKind.EXTERN
    assert KernelKind.of_group([]) is KernelKind.POINTWISE
    assert str(KernelKind.REDUCTION) == "reduction"  # as the events spell it


def _work(fn: Any, args: tuple[Any, ...], backend: str) -> tuple[GraphWork, dict[str, Any]]:
    """The graph's work after codegen, and the codegen event's payload (as JSON)."""
    (gm, _), = lower_fn(fn, *args)
    inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    work = GraphWork(0, gm, inputs, CompileOptions(backend=backend))
    lower(work)
    schedule_stage(work)
    memory_stage(work)
    return work, to_json(codegen_stage(work))


def test_the_graph_carries_its_backend_and_events_name_it() -> None:
    work, event = _work(lambda x: x.exp().sum(-1), (torch.randn(8, 16),), "auto")
    assert isinstance(work.backend, CppBackend)
    assert (event["backend"], event["backend_label"], event["emulated"]) == ("cpp", "C++", False)
    assert {k["target"] for k in event["kernels"]} == {"C++"}
    assert work.build_source.startswith("#include")
    work, event = _work(lambda x: x.exp().sum(-1), (torch.randn(8, 16),), "triton")
    assert isinstance(work.backend, TritonBackend) and event["emulated"] is True
    assert work.build_source == "" and "@triton.jit" in work.wrapper


def test_triton_report_reads_the_compiled_kernel() -> None:
    compiled = types.SimpleNamespace(n_regs=32, n_spills=0,
                                     metadata=types.SimpleNamespace(shared=1024),
                                     asm={"ttir": "module {}", "cubin": b"\x00"})
    fn = types.SimpleNamespace(device_caches={0: ({"key": compiled}, None, None, None, None)})
    assert compiled_report(fn) == {"registers": 32, "spills": 0, "shared_bytes": 1024,
                                    "ir": {"ttir": "module {}"}}
    assert compiled_report(types.SimpleNamespace()) == {}


def test_the_backend_says_which_op_dtype_pairs_it_cannot_express() -> None:
    cpp, triton = choose_backend("cpp", "cpu", OPTS), choose_backend("triton", "cuda", OPTS)
    assert "cannot express 'exp' on int64" in (cpp.refuses("exp", torch.int64) or "")
    assert cpp.refuses("pow", torch.int64) is None  # ks_ipow
    assert triton.refuses("pow", torch.int32) is None  # _ipow (it had no integer rule)
    assert "'sign' on bool" in (triton.refuses("sign", torch.bool) or "")


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_node_the_backend_cannot_express_goes_to_aten_with_the_reason(backend: str) -> None:
    """Regression: torch.sign of a bool tensor was a CodegenError on both backends."""
    (gm, _), = lower_fn(lambda b: torch.sign(b) & b, torch.rand(16) > 0.5)
    inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    work = GraphWork(0, gm, inputs, CompileOptions(backend=backend))
    event = lower(work)
    (fb,) = event.fallbacks
    assert fb.op.startswith("aten.sign") and "cannot express 'sign' on bool" in fb.reason
    assert fb.reason.endswith("computed by ATen")
    names = [b.name for b in event.buffers]
    assert names == [f"buf{i}" for i in range(len(names))]  # nothing left of the refused node
    schedule_stage(work)
    memory_stage(work)
    codegen_stage(work)  # the rest still generates


def test_the_refusal_check_sees_reductions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reductions are ops of the backend's table (combine_<type>): a backend without the
    rule leaves that reduction to ATen and says why, as for any other op."""
    from kernelscope.compiler.codegen.cpp import kernel as cpp

    work, event = _work(lambda x: x.prod(-1) + 1, (torch.randn(8, 16),), "cpp")
    assert work.lowered is not None and not work.lowered.fallbacks
    monkeypatch.delitem(cpp.OPS.rules, "combine_prod")
    work, event = _work(lambda x: x.prod(-1) + 1, (torch.randn(8, 16),), "cpp")
    assert work.lowered is not None
    [fallback] = work.lowered.fallbacks
    assert fallback.op == "aten.prod.dim_int" and "combine_prod" in fallback.reason
    assert all("combine_prod" not in k["source"] for k in event["kernels"])


ENV_READ = re.compile(r"os\.environ|os\.getenv|getenv\(")


def _env_reads(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1)
            if ENV_READ.search(line.split("#", 1)[0])]


def test_the_graph_cache_key_names_each_backends_tools_not_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-graph cache asks the backend what decides its code (`cache_identity`): the
    C++ compiler for C++, the interpreter for Triton. The cache itself reads no environment
    variable (it once read CXX and TRITON_INTERPRET itself)."""
    cpp = choose_backend("cpp", "cpu", CompileOptions())
    triton = choose_backend("triton", "cpu", CompileOptions())
    assert cpp.cache_identity() == {"backend": "cpp", "cxx": cpp_module.CXX}
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton.cache_identity() == {"backend": "triton", "interpret": "1"}
    assert cpp.cache_identity() != triton.cache_identity()
    source = (REPO / "compiler" / "runtime" / "graph_cache.py").read_text()
    assert _env_reads(source) == []
    assert _env_reads('cxx = os.environ.get("CXX", "g++")\n') == [1]
    assert _env_reads("# os.environ is not read here\n") == []
