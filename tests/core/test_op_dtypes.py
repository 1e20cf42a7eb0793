"""The op tables are right per dtype: integer, bool and narrow-integer ops against eager.

Integer and bool results must be equal, not close. C++ runs in-process; Triton runs
under the interpreter in one subprocess (this file run as a script prints one line per
case). An op/dtype pair a backend has no rule for fails at compile time, naming both.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

HERE = Path(__file__).resolve()


def _ints(lo: int, hi: int, n: int = 64, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(lo, hi, (n,), generator=torch.Generator().manual_seed(n + hi),
                         dtype=dtype)


def _nonzero(lo: int, hi: int) -> torch.Tensor:
    t = _ints(lo, hi)
    return torch.where(t == 0, torch.ones_like(t), t)


CASES: dict[str, tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]] = {
    # int64 fmod used as an index: once `std::fmod`, a double, so C++ did not build.
    "roll_of_product": (lambda x: torch.roll(x * 2, 1, 0) + 1, lambda: (torch.randn(8, 4),)),
    "int_fmod_remainder": (lambda a, b: (torch.fmod(a, b), torch.remainder(a, b)),
                           lambda: (_ints(-50, 50), _nonzero(-7, 7))),
    "int_floor_divide": (lambda a, b: a // b, lambda: (_ints(-50, 50), _nonzero(-7, 7))),
    "bool_bitwise": (lambda a, b: ((a & b) | (~a) ^ b, ~a, a ^ b),
                     lambda: (_ints(0, 2) > 0, _ints(0, 2, 64) > 0)),
    "uint8_neg_and_wrap": (lambda x: (-x, (x * 2) // 3, x + 200),
                           lambda: (_ints(0, 256, dtype=torch.uint8),)),
    "int8_wrap": (lambda x: ((x * 3) // 2, -x, x - 100),
                  lambda: (_ints(-128, 128, dtype=torch.int8),)),
    "float_sign_divided": (lambda x: torch.sign(x) / 2, lambda: (torch.randn(64),)),
    "int_pow": (lambda a, b: torch.pow(a, b), lambda: (_ints(-5, 6), _ints(0, 5))),
    # A tensor exponent is an integer pow in the kernel (Triton: _ipow, by squaring; it
    # was a Triton compile error). Negative exponents: 1, +-1 or 0, as torch gives.
    "int_pow_negative_exponents": (lambda a, b: a ** b,
                                   lambda: (_ints(-3, 4), _ints(-4, 3))),
    "int_pow_large_wraps": (lambda a, b: (a ** b, 3 ** b), lambda: (_ints(-9, 10), _ints(0, 40))),
    "int_pow_scalar_exponent": (lambda a: (a ** 20, a ** 17), lambda: (_ints(-4, 5),)),
    "uint8_pow_wraps": (lambda a, b: a ** b, lambda: (_ints(0, 256, dtype=torch.uint8),
                                                       _ints(0, 9, dtype=torch.uint8))),
    # torch.round ties go to the even neighbour (the interpreter's rule was floor(x + 0.5)).
    "round_half_to_even": (lambda x: (torch.round(x), torch.round(x.double())),
                           lambda: (torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997,
                                                  -0.49999997, 8388609.0, 2.0 ** 30 + 0.5,
                                                  float("inf"), float("-inf"), 3.7, -3.7,
                                                  -0.0]),)),
    # No backend has a rule for sign on bool: the node is left to ATen (lowering says why).
    "bool_sign_left_to_aten": (lambda b: torch.sign(b) & b, lambda: (_ints(0, 2) > 0,)),
    # max/min of bools start from False/True (torch.iinfo(torch.bool) raised a TypeError).
    "bool_aminmax": (lambda b: (*torch.aminmax(b), *torch.aminmax(b.view(8, 8), dim=1)),
                     lambda: (_ints(0, 2) > 0,)),
    # g++ 12 crashed (internal compiler error) vectorizing std::signbit of a bf16 value.
    "bf16_signbit": (lambda x: torch.signbit(x),
                     lambda: (torch.tensor([-1.5, 0.0, -0.0, 2.0, float("-inf"), float("inf"),
                                            -3e-3, 7.0] * 4, dtype=torch.bfloat16),)),
}
# Every case compiles on Triton too: a pair a backend cannot express goes to ATen.
TRITON_REFUSES: dict[str, str] = {}


def check(name: str, backend_name: str) -> str:
    from kernelscope.compiler import backend

    fn, make = CASES[name]
    torch._dynamo.reset()
    args = make()
    with torch.no_grad():
        expected = fn(*[a.clone() for a in args])
        try:
            got = torch.compile(fn, backend=backend,
                                options={"backend": backend_name})(*[a.clone() for a in args])
        except Exception as e:  # the message is what the refusal tests check
            return f"error {type(e).__name__}: {e}".replace("\n", " ")
    exp = expected if isinstance(expected, tuple) else (expected,)
    out = got if isinstance(got, tuple) else (got,)
    if len(out) != len(exp):
        return f"{len(out)} outputs, expected {len(exp)}"
    for i, (o, e) in enumerate(zip(out, exp)):
        if (o.dtype, o.shape, o.device) != (e.dtype, e.shape, e.device):
            return f"output {i}: {o.dtype} {tuple(o.shape)} != {e.dtype} {tuple(e.shape)}"
        same = torch.equal(o, e) if not e.dtype.is_floating_point else \
            torch.allclose(o, e, atol=1e-5, rtol=1e-5)
        if not same:
            return f"output {i} differs: {o.tolist()[:8]} vs {e.tolist()[:8]}"
    return "ok"


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpp_matches_eager(case: str) -> None:
    assert check(case, "cpp") == "ok"


def test_triton_interpreter_matches_eager_or_refuses_by_name() -> None:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(HERE.parents[2]))
    proc = subprocess.run([sys.executable, str(HERE), "triton"], cwd=HERE.parents[2], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    assert set(results) == set(CASES)
    for case, result in results.items():
        if case in TRITON_REFUSES:
            assert result.startswith("error") and TRITON_REFUSES[case] in result, result
        else:
            assert result == "ok", (case, result)


def test_unknown_op_or_dtype_is_a_codegen_error_naming_both() -> None:
    from kernelscope.compiler.codegen.optable import CodegenError, OpTable

    table = OpTable("Test", {"exp": {"float": "exp({0})"}, "add": "{0} + {1}"})
    assert table.render("add", ["a", "b"], [torch.int8, torch.int8], "int8") == "a + b"
    with pytest.raises(CodegenError, match="cannot express 'exp' on int32"):
        table.render("exp", ["a"], [torch.int32], "int")
    with pytest.raises(CodegenError, match="no rule for op 'sin'"):
        table.render("sin", ["a"], [torch.float32], "float")


def test_ops_proxy_rejects_names_that_are_not_ops() -> None:
    from kernelscope.compiler.ir.ops import ops

    with pytest.raises(AttributeError, match="ops.frobnicate is not an op"):
        ops.frobnicate  # noqa: B018


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    for case in CASES:
        print(f"{case} {check(case, sys.argv[1])}", flush=True)
