"""The range-split rule that fusion and codegen share (compiler/schedule/domain.py)."""

from __future__ import annotations

import pytest
import torch
from ks_helpers import compiled, lower_fn

from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.codegen.walks import split_vars
from kernelscope.compiler.ir.indexing import FloorDiv, ModularIndexing, sym
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.domain import split_point
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.scheduler import schedule


@pytest.mark.parametrize(("ranges", "outer", "expected"), [
    ([4, 8, 16], 32, 2),
    ([4, 8, 16], 4, 1),
    ([4, 8, 16], 512, 3),  # every dim is an output dim
    ([4, 8, 16], 1, 0),  # every dim is a reduction dim
    ([1, 4, 1, 8], 4, 2),  # the first prefix that fits
    ([1, 4, 8], 1, 0),  # size-1 leading dims go to the reduction side
    ([6, 4], 8, None),  # no prefix multiplies to 8: a flat position
    ([], 1, 0),
])
def test_split_point(ranges: list[int], outer: int, expected: int | None) -> None:
    assert split_point(ranges, outer) == expected


def test_codegen_coordinates_follow_the_split() -> None:
    x, r = sym("x"), sym("r")
    assert split_vars([4, 8, 16], 32, x, r, 16) == [FloorDiv(x, 8), ModularIndexing(x, 1, 8), r]
    flat = r + 3 * x  # no prefix of [6, 4] is 8: through the flat position
    assert split_vars([6, 4], 8, x, r, 3) == [FloorDiv(flat, 4), ModularIndexing(flat, 1, 4)]


def test_fusion_and_codegen_agree_on_a_softmax_epilogue() -> None:
    """The divide runs over the reduction's input (x = 8 rows, split after dim 0) and
    reads the row sums at its own row: fusion accepts it, and the kernel is correct."""
    def f(x: torch.Tensor) -> torch.Tensor:
        return x / x.sum(-1, keepdim=True)

    x = torch.rand(8, 3, 5) + 0.1
    (_, graph), = lower_fn(f, x)
    sched = schedule(graph, choose_backend("cpp", "cpu", CompileOptions()))
    kernels = [s for s in sched.steps if s.plan is not None]
    assert len(kernels) == 1 and kernels[0].plan.kind is KernelKind.REDUCTION
    torch.testing.assert_close(compiled(f, backend="cpp")(x), f(x), atol=1e-6, rtol=1e-6)
