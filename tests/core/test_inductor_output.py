"""Inductor's own output code, captured for the diff view (compiler/runtime/inductor.py)."""

from __future__ import annotations

import torch

from kernelscope.compiler.runtime.inductor import inductor_output, kernels_of


def test_inductor_output_code_is_captured_with_its_kernels() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + y)

    x, y = torch.randn(256), torch.randn(256)

    def build():
        torch._dynamo.reset()
        compiled = torch.compile(f, backend="inductor")
        return lambda: compiled(x, y)

    out, fn = inductor_output(build)
    assert out["error"] is None and fn is not None
    assert len(out["code"]) == 1 and "def call(" in out["code"][0]
    [kernel] = out["kernels"]
    assert kernel["name"].startswith("cpp_fused_add_relu")
    assert kernel["language"] == "cpp" and 'extern "C"' in kernel["source"]
    torch.testing.assert_close(fn(), f(x, y))


def test_triton_kernels_are_cut_out_by_name() -> None:
    module = (
        "triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', '''\n"
        "import triton\n@triton.jit\ndef triton_poi_fused_add_0(in_ptr0, xnumel):\n"
        "    pass\n''', device_str='cuda')\n\n"
        "cpp_fused_mul_1 = async_compile.cpp_pybinding(['float*'], '''\nvoid kernel() {}\n''')\n"
    )
    kernels = kernels_of(module)
    assert [(k["name"], k["language"]) for k in kernels] == [
        ("triton_poi_fused_add_0", "python"),
        ("cpp_fused_mul_1", "cpp"),
    ]
    assert kernels[0]["source"].startswith("import triton\n@triton.jit")
    assert kernels[1]["source"] == "void kernel() {}\n"
