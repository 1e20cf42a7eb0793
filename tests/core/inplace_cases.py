"""Input mutations on the Triton backend (run under TRITON_INTERPRET=1 by test_inplace.py).

Each case mutates its inputs; the compiled run must leave every input and output as eager
does, and say in its wrapper whether a kernel wrote over the input (`expect_in_place`).
Prints one line per case: `name ok`, or `name` and what went wrong.
"""

from __future__ import annotations

import copy
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.cases import adam_update


def _shifted(x: torch.Tensor) -> None:
    x.copy_(x.flip(0) * 2)  # reads other elements than it writes: never in place


def _read_after(x: torch.Tensor) -> torch.Tensor:
    y = x * 3  # the old value, possibly computed after the update's kernel
    x.add_(1)
    return y + x.sum()


def _clone_then_mutate(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    x.mul_(2)
    return y


def _adam() -> tuple[Any, ...]:
    lists = tuple([torch.randn(100 + 8 * i) for i in range(3)] for _ in range(3))
    return (*lists, [torch.rand(100 + 8 * i) for i in range(3)])


CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], bool | None]] = {
    "adam": (adam_update, _adam, True),
    "shifted_read": (_shifted, lambda: (torch.randn(4096),), False),  # several programs
    "read_after": (_read_after, lambda: (torch.randn(8, 16),), None),
    "clone_then_mutate": (_clone_then_mutate, lambda: (torch.randn(32),), None),
}


def _flat(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _flat(v)]
    return []


def check(name: str) -> str:
    from kernelscope import compiler
    from kernelscope.compiler.codegen import wrapper

    fn, make, expect = CASES[name]
    torch.manual_seed(0)
    args = make()
    mine = copy.deepcopy(args)
    sources: list[str] = []
    orig = wrapper.generate_wrapper

    def keep(*a: Any, **k: Any) -> Any:
        src, lines = orig(*a, **k)
        sources.append(src)
        return src, lines

    wrapper.generate_wrapper = keep
    import kernelscope.compiler.compile_fx as cfx
    cfx.generate_wrapper = keep
    torch._dynamo.reset()
    try:
        out = torch.compile(fn, backend=lambda gm, ex: compiler.backend(
            gm, ex, options={"backend": "triton", "cache_dir": tempfile.mkdtemp()}))(*mine)
    finally:
        wrapper.generate_wrapper = cfx.generate_wrapper = orig
    want = fn(*args)
    for got, ref in zip(_flat((mine, out)), _flat((args, want))):
        if not torch.allclose(got, ref, rtol=1e-5, atol=1e-5):
            return f"mismatch: max abs err {(got - ref).abs().max().item():.3g}"
    in_place = any("written in place" in s for s in sources)
    if expect is not None and in_place != expect:
        return f"in place: {in_place}, expected {expect}"
    return "ok"


if __name__ == "__main__":
    for case in sys.argv[1:] or sorted(CASES):
        try:
            print(case, check(case), flush=True)
        except Exception as e:  # noqa: BLE001 - one line per case, whatever happened
            print(case, f"error: {type(e).__name__}: {e}", flush=True)
