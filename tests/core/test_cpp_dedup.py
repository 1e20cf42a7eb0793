"""C++ kernels with one body (a repeated layer) are compiled once: the library's source has
the body once and a one-line forwarder for each repeat, so it still exports every kernel by
its own name; the graph gives eager's result and each repeat shows the machine code it
runs (compiler/codegen/cpp/dedup.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelscope.compiler.codegen.backend import GeneratedKernel
from kernelscope.compiler.codegen.cpp.dedup import (
    NOTE,
    body_key,
    forwarded_to,
    library_kernels,
)
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline


def _kernel(name: str, constant: str, origin: str) -> GeneratedKernel:
    source = (f'extern "C" void {name}(const float* __restrict__ in_ptr0, '
              f"float* __restrict__ out_ptr0)\n{{\n    // {name}: pointwise\n"
              f"    // fuses: {origin}\n    for (int64_t x0 = 0; x0 < 64; x0++) {{\n"
              f"        out_ptr0[x0] = in_ptr0[x0] * {constant}f;\n    }}\n}}\n")
    return GeneratedKernel(name, source, [], ["in_ptr0", "out_ptr0"], "")


def test_a_repeated_body_is_built_once_and_forwarded() -> None:
    a = _kernel("cpp_poi_fused_mul_0", "1.5", "mul (line 3)")
    b = _kernel("cpp_poi_fused_mul_4", "1.5", "mul_2 (line 3)")
    c = _kernel("cpp_poi_fused_mul_8", "2.5", "mul_4 (line 3)")
    assert body_key(a) == body_key(b) != body_key(c)
    text = library_kernels([a, b, c])
    assert text.count("out_ptr0[x0] = in_ptr0[x0] * 1.5f") == 1
    assert text.count("out_ptr0[x0] = in_ptr0[x0] * 2.5f") == 1
    assert ('extern "C" void cpp_poi_fused_mul_4(const float* __restrict__ in_ptr0, '
            "float* __restrict__ out_ptr0) { cpp_poi_fused_mul_0(in_ptr0, out_ptr0); }  "
            f"{NOTE} cpp_poi_fused_mul_0") in text
    assert forwarded_to(text, "cpp_poi_fused_mul_4") == "cpp_poi_fused_mul_0"
    assert forwarded_to(text, "cpp_poi_fused_mul_0") is None
    assert forwarded_to(text, "cpp_poi_fused_mul_8") is None


LAYERS = """import torch


def layers(x, w):
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.25) @ w
    return x


example_inputs = (torch.randn(64, 64), torch.randn(64, 64))
"""


@pytest.mark.skipif(shutil.which("objdump") is None, reason="no objdump")
def test_a_repeated_layer_builds_one_body_and_matches_eager(tmp_path: Path) -> None:
    path = tmp_path / "snippet.py"
    path.write_text(LAYERS)
    cache = tmp_path / "cache"
    events = list(run_pipeline(LAYERS, CompileOptions(device="cpu", backend="cpp",
                                                      profile=False, cache_dir=str(cache)),
                               str(path)))
    assert events[-1].data["ok"], [e.data for e in events if e.stage == "error"]
    kernels = next(e.data for e in events if e.stage == "codegen")["graphs"][0]["kernels"]
    names = [k["name"] for k in kernels]
    library = next(cache.glob("kernels_*.cpp")).read_text()
    forwarders = [n for n in names if forwarded_to(library, n)]
    assert len(forwarders) >= 2, (names, library.count(NOTE))
    built = [n for n in names if n not in forwarders]
    assert all(library.count(f'extern "C" void {n}(') == 1 for n in names)
    compiled = next(e.data for e in events if e.stage == "compile")["graphs"][0]["kernels"]
    asm = {k["name"]: k for k in compiled}
    for name in forwarders:  # a repeat shows the machine code of the body it runs
        first = forwarded_to(library, name)
        assert first in built
        assert asm[name]["ir"]["asm"] == asm[first]["ir"]["asm"]
        assert f"<{first}>:" in asm[name]["ir"]["asm"] and asm[name]["line_maps"]["asm"]
