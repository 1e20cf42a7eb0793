"""Dtypes, integer math, boolean reductions, tuples and in-place ops: compiled vs eager.

Run as a script (`python variety.py BACKEND`) it prints one line per case; the tests run
it in-process for C++ and in a subprocess under the Triton interpreter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
    "fp16_add": (lambda x, y: (x + y).relu() * 2,
                 lambda: (torch.randn(1000).half(), torch.randn(1000).half())),
    "bf16_softmax": (lambda x: torch.softmax(x, -1), lambda: (torch.randn(8, 100).bfloat16(),)),
    "fp16_sum": (lambda x: x.sum(-1), lambda: (torch.randn(8, 100).half(),)),
    "int_ops": (lambda x: (x * 3 + 1) // 2 % 5, lambda: (torch.randint(0, 100, (64,)),)),
    "bool_out": (lambda x: (x > 0) & (x < 1), lambda: (torch.randn(64),)),
    "int_times_float": (lambda x, i: x * i + i.float().mean(),
                        lambda: (torch.randn(16), torch.randint(0, 5, (16,)))),
    "where_scalar": (lambda x: torch.where(x > 0, 1.0, -x), lambda: (torch.randn(32),)),
    "float64": (lambda x: x.exp().sum(0), lambda: (torch.randn(10, 7, dtype=torch.float64),)),
    "any_all": (lambda x: torch.stack([(x > 1).any(1), (x > -3).all(1)]),
                lambda: (torch.randn(10, 7),)),
    "tuple_out": (lambda x: (x.sin(), x.cos() + 1), lambda: (torch.randn(100),)),
    "mean_keepdim": (lambda x: x - x.mean((1, 2), keepdim=True), lambda: (torch.randn(4, 5, 6),)),
    "clamp": (lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0.1), lambda: (torch.randn(100),)),
    "in_place": (lambda x: x.mul_(2).add_(1), lambda: (torch.randn(100),)),
}
NO_INTERPRETER: set[str] = set()  # cases the Triton interpreter cannot run


def check(name: str, backend_name: str) -> str:
    """"ok", or what differs from eager (count, dtype, device, shape, values, inputs)."""
    from ks_helpers import check_compiled

    fn, make = CASES[name]
    try:
        check_compiled(fn, make(), backend=backend_name)
    except AssertionError as e:
        return " ".join(str(e).split())[:500]
    return "ok"


if __name__ == "__main__":
    be = sys.argv[1]
    for case in CASES:
        if be == "triton" and case in NO_INTERPRETER:
            continue
        print(f"{case} {check(case, be)}", flush=True)
