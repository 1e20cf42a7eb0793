"""The lean Triton launch path and the CUDA-graph wrapper, with stand-ins for Triton's
JIT function and compiled kernel (this machine has no GPU; the H200 runs are in
docs/perf.md)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from kernelscope.compiler.codegen.triton import launch
from kernelscope.compiler.codegen.triton.backend import TritonBackend
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime import graphs


class FakeCompiled:
    function, packed_metadata = "fn-handle", "meta"

    def __init__(self) -> None:
        self.launches: list[tuple[Any, ...]] = []

    def _init_handles(self) -> None:
        pass

    def run(self, *args: Any) -> None:
        self.launches.append(args)


class FakeJit:
    arg_names = ["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"]

    def __init__(self) -> None:
        self.compiled = FakeCompiled()
        self.jit_calls = 0

    def __getitem__(self, grid: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> None:
            self.jit_calls += 1
        return run

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> FakeCompiled:
        return self.compiled


@pytest.fixture
def fake_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch, "_stream", lambda device: 7)
    monkeypatch.setattr(launch, "_on_device", lambda t: True)


def test_first_launch_through_the_jit_then_direct(fake_device: None) -> None:
    jit = FakeJit()
    kernel = launch.FastKernel(jit)
    x, y = torch.zeros(64), torch.zeros(64)
    for _ in range(3):
        kernel[(4,)](x, y, 64, XBLOCK=16, num_warps=4)
    assert jit.jit_calls == 1
    assert len(jit.compiled.launches) == 2
    g0, g1, g2, stream, fn, meta, _, _, _, *rest = jit.compiled.launches[0]
    assert (g0, g1, g2, stream, fn, meta) == (4, 1, 1, 7, "fn-handle", "meta")
    assert rest[:2] == [x, y] and rest[2:] == [64, 16]  # constexprs in signature order
    assert kernel.arg_names == FakeJit.arg_names  # reports still see the JIT function


def test_misaligned_tensor_takes_the_jit_path(fake_device: None) -> None:
    jit = FakeJit()
    kernel = launch.FastKernel(jit)
    x, y = torch.zeros(65), torch.zeros(64)
    kernel[(4,)](x, y, 64, XBLOCK=16, num_warps=4)
    kernel[(4,)](x[1:], y, 64, XBLOCK=16, num_warps=4)  # 4 bytes off: not 16-aligned
    assert jit.jit_calls == 2 and not jit.compiled.launches


def test_a_launcher_that_rejects_the_arguments_falls_back(fake_device: None) -> None:
    jit = FakeJit()

    def reject(*args: Any) -> None:
        raise TypeError("function takes 9 positional arguments")

    jit.compiled.run = reject  # type: ignore[method-assign]
    kernel = launch.FastKernel(jit)
    x, y = torch.zeros(64), torch.zeros(64)
    for _ in range(3):
        kernel[(4,)](x, y, 64, XBLOCK=16, num_warps=4)
    assert jit.jit_calls == 3


def test_cpu_tensors_are_never_launched_directly() -> None:
    jit = FakeJit()
    kernel = launch.FastKernel(jit)
    x = torch.zeros(64)
    for _ in range(2):
        kernel[(4,)](x, x, 64, XBLOCK=16, num_warps=4)
    assert jit.jit_calls == 2 and not jit.compiled.launches


def test_cuda_graphs_run_plainly_off_the_gpu() -> None:
    calls: list[int] = []

    def fn(*args: Any) -> list[Any]:
        calls.append(1)
        return [args[0] + 1]

    g = graphs.CudaGraphed(fn, static=[])
    x = torch.ones(3)
    for _ in range(3):
        assert torch.equal(g(x)[0], x + 1)
    assert len(calls) == 3 and g.graph is None and "CPU" in (g.why_not or "")


def test_cuda_graphs_option_is_known() -> None:
    from kernelscope.compiler.options import CompileOptions

    assert CompileOptions.from_mapping({"cuda_graphs": True}).cuda_graphs


def test_install_wraps_and_the_jit_switch_unwraps(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    module = types.ModuleType("m")
    jit = FakeJit()
    module.k = jit  # type: ignore[attr-defined]
    native, emulated = (TritonBackend(d, CompileOptions()) for d in ("cuda", "cpu"))
    emulated.after_import(module, ["k"])  # the interpreter keeps the JIT path
    assert module.k is jit  # type: ignore[attr-defined]
    native.after_import(module, ["k"])
    assert isinstance(module.k, launch.FastKernel)  # type: ignore[attr-defined]
    monkeypatch.setenv("KERNELSCOPE_LAUNCH", "jit")
    native.after_import(module, ["k"])
    assert module.k is jit  # type: ignore[attr-defined]


def test_after_the_first_direct_launch_the_site_is_one_closure(fake_device: None) -> None:
    jit = FakeJit()
    kernel = launch.FastKernel(jit)
    x, y = torch.zeros(64), torch.zeros(64)
    for _ in range(2):
        kernel[(4,)](x, y, 64, XBLOCK=16, num_warps=4)
    site = kernel[(4,)]
    assert not isinstance(site, launch._Launch) and site.site.nargs == 3  # type: ignore
    site(x, y, 64, XBLOCK=16, num_warps=4)
    assert jit.jit_calls == 1 and len(jit.compiled.launches) == 2


def test_arguments_the_wrapper_allocates_are_not_checked_per_launch(fake_device: None
                                                                    ) -> None:
    jit = FakeJit()
    kernel = launch.FastKernel(jit, aligned=[1])  # out_ptr0 is the wrapper's own buffer
    x, y = torch.zeros(65), torch.zeros(65)
    for _ in range(2):
        kernel[(4,)](x, y, 64, XBLOCK=16, num_warps=4)
    assert kernel[(4,)].site.aligned == (0,)  # type: ignore[union-attr]
    kernel[(4,)](x[1:], y, 64, XBLOCK=16, num_warps=4)  # an input 4 bytes off: checked
    assert jit.jit_calls == 2 and len(jit.compiled.launches) == 1


def test_a_launch_hook_takes_the_jit_path(fake_device: None,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from triton import knobs

    jit = FakeJit()
    kernel = launch.FastKernel(jit)
    x = torch.zeros(64)
    for _ in range(2):
        kernel[(4,)](x, x, 64, XBLOCK=16, num_warps=4)
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", lambda *a: None)
    kernel[(4,)](x, x, 64, XBLOCK=16, num_warps=4)
    assert jit.jit_calls == 2 and len(jit.compiled.launches) == 1


def test_only_the_wrappers_own_allocations_are_declared_aligned() -> None:
    from kernelscope.compiler.codegen.wrapper import _own_allocations
    from kernelscope.compiler.schedule.memory import BufferPlan, MemoryPlan

    plans = [BufferPlan("buf0", 64, 0, 1, False, "wrapper", storage="buf0"),
             BufferPlan("buf1", 64, 2, 3, False, "wrapper", "buf0", storage="buf0"),
             BufferPlan("buf2", 64, 0, 1, False, "extern", storage="buf2"),  # ATen's: a view?
             BufferPlan("buf3", 64, 2, 3, False, "wrapper", "buf2", storage="buf2"),
             BufferPlan("buf4", 0, 0, 3, True, "input", storage="arg0_1")]
    assert _own_allocations(MemoryPlan(plans)) == {"buf0", "buf1"}
    lines = TritonBackend("cuda", CompileOptions()).launch_facts({"k": (1, 2)})
    namespace: dict[str, object] = {}
    exec("\n".join(lines), namespace)  # noqa: S102 - our own generated lines
    assert namespace["ALIGNED"] == {"k": (1, 2)}
