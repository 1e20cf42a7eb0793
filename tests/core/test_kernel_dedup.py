"""Triton kernels with one body (a repeated layer) are defined once in the wrapper and
compiled once; the repeats are the same kernel under their own names, and the graph still
gives eager's result (under the Triton interpreter, in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ks_helpers import REPO

from kernelscope.compiler.codegen.backend import GeneratedKernel
from kernelscope.compiler.codegen.triton.backend import kernel_body


def _kernel(name: str, constant: str, origin: str) -> GeneratedKernel:
    source = (f"@triton.jit\ndef {name}(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n"
              f"    # {name}: pointwise\n    # fuses: {origin}\n"
              f"    x = tl.load(in_ptr0 + tl.arange(0, XBLOCK))\n"
              f"    tl.store(out_ptr0 + tl.arange(0, XBLOCK), x * {constant})\n")
    return GeneratedKernel(name, source, [], ["in_ptr0", "out_ptr0"], "")


def test_a_body_ignores_the_name_and_the_comments_but_not_the_code() -> None:
    a = _kernel("triton_poi_fused_mul_0", "1.5", "mul (line 3)")
    b = _kernel("triton_poi_fused_mul_4", "1.5", "mul_2 (line 3)")
    c = _kernel("triton_poi_fused_mul_8", "2.5", "mul_4 (line 3)")
    assert kernel_body(a) == kernel_body(b) != kernel_body(c)


SCRIPT = """
import torch
from kernelscope.compiler.compile_fx import make_backend
from kernelscope.compiler.options import CompileOptions

def layers(x, w):
    for _ in range(3):
        x = torch.tanh(x * 1.5 + 0.25) @ w
    return x

x, w = torch.randn(6, 8), torch.randn(8, 8) / 3
sink = []
with torch.no_grad():
    got = torch.compile(layers, backend=make_backend(
        CompileOptions(backend="triton", cache_dir={cache!r}), sink=sink))(x, w)
(graph,) = sink
names = graph.kernels
print(len(names), len({{id(getattr(graph.module, n)) for n in names}}),
      graph.path.read_text().count("compiled once"),
      torch.allclose(got, layers(x, w), atol=1e-5, rtol=1e-5))
"""


def test_repeated_kernels_are_one_kernel_and_still_right(tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", SCRIPT.format(cache=str(tmp_path))],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kernels, distinct, aliases, ok = proc.stdout.split()
    assert int(kernels) >= 3 and int(distinct) == int(kernels) - 2 and int(aliases) == 2
    assert ok == "True"
