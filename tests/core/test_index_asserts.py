"""debug_index_asserts: every indirect index is bounds-checked inside the kernel (a C++
check that stops the process, `tl.device_assert` in Triton), as Inductor's
debug_index_asserts does. Out-of-range runs stop their own subprocess; in-range ones
(negative indices wrap as in eager, masked-off lanes are not checked) match eager."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

SCRIPT = r"""
import sys, torch
from kernelscope.compiler import backend
backend_name, case = sys.argv[1], sys.argv[2]
w = torch.randn(10, 4)
idx = {"in_range": torch.tensor([[0, 9], [-1, -10]]), "too_big": torch.tensor([[0, 10]]),
       "too_negative": torch.tensor([[0, -11]])}[case]
def fn(w, i):  # the indexed rows are read inside a cat segment (a masked body)
    return torch.cat([w[:1], w[i].flatten(0, 1)]) * 2
opts = {"backend": backend_name, "debug_index_asserts": True}
got = torch.compile(fn, backend=backend, options=opts)(w, idx)
torch.testing.assert_close(got, fn(w, idx), rtol=0, atol=0)
print("MATCHES EAGER")
"""


def _run(backend_name: str, case: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    if backend_name == "triton":
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run([sys.executable, "-c", SCRIPT, backend_name, case],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.parametrize("backend_name", ["cpp", "triton"])
def test_in_range_indices_match_eager(backend_name: str) -> None:
    proc = _run(backend_name, "in_range")
    assert proc.returncode == 0 and "MATCHES EAGER" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.parametrize("backend_name", ["cpp", "triton"])
@pytest.mark.parametrize("case", ["too_big", "too_negative"])
def test_out_of_range_index_stops_the_kernel(backend_name: str, case: str) -> None:
    proc = _run(backend_name, case)
    assert proc.returncode != 0 and "MATCHES EAGER" not in proc.stdout
    assert "index out of bounds" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.parametrize("backend_name,check", [("cpp", "ks_index_error("),
                                                 ("triton", "tl.device_assert(")])
def test_checks_only_with_the_option(backend_name: str, check: str) -> None:
    import torch
    from ks_helpers import lower_fn

    from kernelscope.compiler.compile_fx import (
        codegen_stage,
        lower,
        memory_stage,
        schedule_stage,
    )
    from kernelscope.compiler.graph_work import GraphWork
    from kernelscope.compiler.options import CompileOptions

    args = (torch.randn(10, 4), torch.tensor([1, 2]))
    (gm, _), = lower_fn(lambda w, i: torch.nn.functional.embedding(i, w) * 2, *args)
    inputs = [n.meta["val"] for n in gm.graph.nodes if n.op == "placeholder"]
    for on in (False, True):
        work = GraphWork(0, gm, inputs, CompileOptions(backend=backend_name,
                                                       debug_index_asserts=on))
        lower(work)
        schedule_stage(work)
        memory_stage(work)
        text = "\n".join(k.source for k in codegen_stage(work).kernels)
        assert (check in text) == on, text
        assert ("@triton.jit(debug=True)" in text) == (on and backend_name == "triton")
