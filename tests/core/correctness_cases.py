"""Regression cases for the correctness classes: compiled vs eager, exactly where it must be.

Each case is (fn, make_inputs). `check` compiles fn with the named backend and compares
output count, dtype, shape, device and values (NaNs equal) with eager. Run as a script
(`python correctness_cases.py BACKEND`) it prints one line per case: the tests run it
in-process for C++ and in a subprocess under the Triton interpreter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

NAN = float("nan")
Case = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]


def _channels_last() -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.randn(2, 3, 8, 8).to(memory_format=torch.channels_last),
            torch.randn(4, 3, 3, 3))


def _conv_of_shared(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = x * 2  # two users: stored before the conv reads it
    return F.conv2d(y, w) + y.amax()


def _nan_rows() -> tuple[torch.Tensor]:
    return (torch.tensor([[1.0, NAN, 3.0, NAN], [1.0, 5.0, 3.0, 5.0], [-1.0, -2.0, NAN, 0.0]]),)


def _special(rows: int, n: int) -> torch.Tensor:
    x = torch.randn(rows, n) * 3
    x[1, 7], x[4, n // 2] = NAN, float("inf")
    x[2, :], x[3, 1:] = float("-inf"), float("-inf")
    x[5, :-1] = float("-inf")
    return x


def _monotone() -> tuple[torch.Tensor]:
    ramp = torch.linspace(-60.0, 60.0, 5000)
    return (torch.stack([ramp, -ramp, ramp * 1e-3, torch.randn(5000)]).repeat(10, 1),)


CASES: dict[str, Case] = {
    # zero-size tensors, zero-size dims, dim=() and 0-d inputs
    "unary_empty": (torch.exp, lambda: (torch.randn(0, 3),)),
    "cat_with_empty": (lambda x: torch.cat([x, torch.empty(0)]) * 2, lambda: (torch.randn(3),)),
    "sum_zero_dim": (lambda x: x.sum(0), lambda: (torch.randn(0, 3),)),
    "prod_zero_dim": (lambda x: x.prod(1), lambda: (torch.randn(3, 0),)),
    "mean_zero_dim": (lambda x: x.mean(0), lambda: (torch.randn(0, 3),)),
    "sum_0d": (lambda x: x.sum() + 1, lambda: (torch.tensor(3.0),)),
    "sum_dim_empty_tuple": (lambda x: x.sum(dim=()), lambda: (torch.randn(3, 4),)),
    "amax_0d": (lambda x: x.amax(), lambda: (torch.tensor(-2.0),)),
    "argmax_0d": (lambda x: x.argmax(), lambda: (torch.tensor(-2.0),)),
    "linspace_0_steps": (lambda x: torch.linspace(0, 1, 0) + x.sum(), lambda: (torch.randn(2),)),
    "eye_0": (lambda x: torch.eye(0) + x.sum(), lambda: (torch.randn(2),)),
    "unfold_empty": (lambda x: x.unfold(1, 2, 1) * 2, lambda: (torch.randn(0, 4),)),
    # integer and bool semantics
    "bitwise_not_bool_mask": (lambda x, m: x.masked_fill(~m, float("-inf")).softmax(-1),
                              lambda: (torch.randn(3, 4), torch.rand(3, 4) > 0.3)),
    "logical_xor_float": (torch.logical_xor, lambda: (torch.tensor([True, False, True]),
                                                       torch.tensor([2.0, 0.0, 0.0]))),
    "logical_and_int": (torch.logical_and, lambda: (torch.tensor([2, 0, -1]),
                                                     torch.tensor([3, 3, 0]))),
    "int_pow": (lambda x: x ** 3 + x ** 0, lambda: (torch.tensor([2, -3, 5, 0]),)),
    "int_fmod_negative": (torch.fmod, lambda: (torch.tensor([-7, 7, -8, 8]),
                                                torch.tensor([3, -3, 3, -5]))),
    "int_remainder_negative": (torch.remainder, lambda: (torch.tensor([-7, 7, -8, 8]),
                                                          torch.tensor([3, -3, 3, -5]))),
    "int_div_floor": (lambda x, y: torch.div(x, y, rounding_mode="floor"),
                      lambda: (torch.tensor([-7, 7, -8, 8]), torch.tensor([3, -3, 3, -5]))),
    "int_div_trunc": (lambda x, y: torch.div(x, y, rounding_mode="trunc"),
                      lambda: (torch.tensor([-7, 7, -8, 8]), torch.tensor([3, -3, 3, -5]))),
    "neg_uint8": (lambda x: -x, lambda: (torch.tensor([1, 2, 250], dtype=torch.uint8),)),
    "sum_bool": (lambda x: x.sum(), lambda: (torch.tensor([True, True, False]),)),
    "sum_int": (lambda x: x.sum(1), lambda: (torch.randint(-5, 5, (4, 7), dtype=torch.int32),)),
    "dtype_view": (lambda x: (x * 2).view(torch.int32), lambda: (torch.randn(4),)),
    "float_to_int": (lambda x: (x * 100).to(torch.int32), lambda: (torch.randn(16),)),
    # NaN semantics
    "argmax_nan": (lambda x: torch.argmax(x, 1), _nan_rows),
    "argmin_nan_flat": (lambda x: torch.argmin(x), _nan_rows),
    "amax_nan": (lambda x: torch.amax(x, 1), _nan_rows),
    "max_dim_nan": (lambda x: torch.max(x, 1), _nan_rows),
    "min_nan": (lambda x: torch.min(x), _nan_rows),
    "shift_by_max_nan": (lambda x: x - x.amax(1, keepdim=True), _nan_rows),
    "softmax_nan": (lambda x: torch.softmax(x, 1), _nan_rows),
    "logsumexp_nan": (lambda x: torch.logsumexp(x, 1), _nan_rows),
    "var_correction_ge_n": (lambda x: torch.var(x, 1, correction=5), lambda: (torch.randn(3, 4),)),
    "std_single": (lambda x: x.std(1), lambda: (torch.randn(3, 1),)),
    # views and storage offsets
    "chunk_offsets": (lambda x: torch.chunk(x, 3), lambda: (torch.randn(10, 5, 5),)),
    "chunk_of_lazy": (lambda x: torch.chunk(x * 2, 3)[1] + 1, lambda: (torch.randn(10, 5, 5),)),
    "split_of_slice": (lambda x: torch.split(x[2:], 3), lambda: (torch.randn(10, 5),)),
    "unbind": (lambda x: torch.unbind(x + 1, 1), lambda: (torch.randn(4, 3),)),
    "diagonal_offset": (lambda x: torch.diagonal(x, 1, 1, 2) + 0, lambda: (torch.randn(2, 4, 5),)),
    "diagonal_negative": (lambda x: torch.diagonal(x, -1) * 1, lambda: (torch.randn(3, 4),)),
    "as_strided_channels_last": (
        lambda x: x.contiguous(memory_format=torch.channels_last).as_strided((2, 3), (1, 2)) + 1,
        lambda: (torch.randn(1, 2, 2, 3),)),
    "negative_slice": (lambda x: x[-3:-1] * 2, lambda: (torch.randn(6, 2),)),
    "flip": (lambda x: x.flip(0) + 1, lambda: (torch.randn(5),)),
    "unfold": (lambda x: x.unfold(1, 3, 2) * 2, lambda: (torch.randn(2, 7),)),
    "roll": (lambda x: torch.roll(x * 2, (1, -1), (0, 1)), lambda: (torch.randn(5, 3),)),
    # indirect indexing
    "index_negative": (lambda x, i: x[i], lambda: (torch.randn(5), torch.tensor([-1, 0, -5]))),
    "gather_negative_free": (lambda x, i: torch.gather(x, 1, i),
                             lambda: (torch.randn(3, 4), torch.tensor([[0, 3], [1, 1], [3, 2]]))),
    "index_broadcast": (lambda x, i, j: x[i, j],
                        lambda: (torch.randn(4, 5), torch.tensor([[0], [3]]),
                                 torch.tensor([1, -1, 2]))),
    "prod_long_row": (lambda x: x.prod(1), lambda: (torch.rand(1, 2050) * 0.2 + 0.9,)),
    # prod(0) of a 1 x 2050 tensor is a reduction over one element: fused with the 1 x 2050
    # row reductions it made one 2050 x 1 kernel that wrote 2050 results into buffers of one
    "prod_every_dim_long_row": (lambda x: (x.prod(0), x.prod(1), x.prod()),
                                lambda: (torch.rand(1, 2050) * 0.2 + 0.9,)),
    # the inference classes of issue 16: NaN-propagating maximum/minimum (tl.maximum's
    # default is maxnum on a GPU), bool add/mul (tl.int1 wraps), 0-d gathers, constants
    # divided by zero (Python folded `1.0 / 0.0`), loads through one computed element
    "maximum_minimum_nan": (lambda a, b: (torch.maximum(a, b), torch.minimum(a, b)),
                            lambda: (torch.tensor([1.0, NAN, 3.0, NAN, -2.0]),
                                     torch.tensor([NAN, 2.0, 1.0, NAN, -1.0]))),
    "clamp_nan_bounds": (lambda x, lo: torch.max(torch.min(x, lo + 2), lo),
                         lambda: (torch.tensor([0.5, NAN, 9.0]), torch.tensor([NAN, 0.0, 1.0]))),
    "bool_add_mul": (lambda a, b: (a + b, a * b, a & b, a | b, a ^ b, ~a),
                     lambda: (torch.tensor([True, False, True, False]),
                              torch.tensor([True, True, False, False]))),
    "gather_0d_index": (lambda x, i: torch.gather(x, 0, i) * 2,
                        lambda: (torch.randn(5), torch.tensor(3))),
    "gather_0d_input": (lambda x, i: torch.gather(x, 0, i) + 1,
                        lambda: (torch.tensor(3.0), torch.tensor(0))),
    "full_like_div_zero": (lambda x: (torch.full_like(x, 1.0) / 0, torch.full_like(x, -2) / 0,
                                      torch.zeros_like(x) / 0),
                           lambda: (torch.randn(4),)),
    "index_single_element": (lambda x, i: x[i] * 2, lambda: (torch.randn(8), torch.tensor([-3]))),
    "bucketize": (lambda x, b: (torch.bucketize(x, b), torch.bucketize(x, b, right=True),
                                torch.bucketize(x, b, out_int32=True)),
                  lambda: (torch.rand(64, 64) * 2 - 1,
                           torch.tensor([-0.9, -0.8, 0.1, 0.2, 0.5, 0.9]))),
    "bucketize_int_of_sum": (lambda x, b: torch.bucketize(x + 1, b) * 2,
                             lambda: (torch.randint(0, 10, (70,)),
                                      torch.tensor([1, 3, 5, 7], dtype=torch.int32))),
    # a conversion to a 16-bit float inside a fused kernel rounds (C++ computes them in
    # float and dropped the rounding: the next op read the unrounded value)
    "bf16_round_trip": (lambda x: (x * 3).to(torch.bfloat16).to(torch.float32) * 1.001,
                        lambda: (torch.randn(64),)),
    "f16_round_trip": (lambda x: (x * 3).half().float() + 0.1, lambda: (torch.randn(64),)),
    # complex goes to ATen
    "complex_view_as_real": (lambda x: torch.view_as_real(x * 2) + 1,
                             lambda: (torch.randn(3, dtype=torch.complex64),)),
    # multi-output linalg wrappers
    "linalg_qr": (torch.linalg.qr, lambda: (torch.randn(3, 3),)),
    "linalg_inv_error_check": (torch.linalg.inv, lambda: (torch.randn(3, 3) + 3 * torch.eye(3),)),
    "linalg_solve": (torch.linalg.solve, lambda: (torch.randn(3, 3) + 3 * torch.eye(3),
                                                  torch.randn(3, 2))),
    "linalg_eigh": (lambda x: torch.linalg.eigh(x @ x.T + torch.eye(3)),
                    lambda: (torch.randn(3, 3),)),
    # extern results laid out like their inputs (conv keeps channels_last; on CUDA flash
    # attention keeps its query's dim order): the kernels after them read the meta's strides
    "conv_channels_last_input": (lambda x, w: F.conv2d(x * 2, w) + 1, _channels_last),
    "conv_channels_last_shared": (_conv_of_shared, _channels_last),
    # softmax over long rows: one-pass logsumexp on Triton (lowering/softmax.py), with
    # NaN, all -inf, one finite value and +inf rows; split (few rows) and unsplit
    "softmax_long_rows_special": (lambda x: torch.softmax(x, -1), lambda: (_special(80, 5000),)),
    "log_softmax_long_rows_special": (lambda x: torch.log_softmax(x, -1),
                                      lambda: (_special(80, 5000),)),
    "softmax_split_rows_special": (lambda x: torch.softmax(x, -1), lambda: (_special(6, 20000),)),
    "cross_entropy_long_rows": (torch.nn.functional.cross_entropy,
                                lambda: (torch.randn(70, 5000) * 4, torch.randint(0, 5000, (70,)))),
    # rows whose max rises (every step rescales the sum) or falls (never), and an argmax
    # beside a softmax over the same long rows (two reductions and a store loop, one kernel)
    "log_softmax_long_rows_monotone": (lambda x: torch.log_softmax(x, -1), _monotone),
    "softmax_long_rows_with_argmax": (lambda x: (torch.softmax(x, -1), x.argmax(-1)),
                                      lambda: (torch.randint(0, 3, (40, 5000)).float(),)),
    # a gather through a view (class dim in the middle): the index has `target % 3` of a
    # loaded target, which was named before the loop that loads it (a C++ build error)
    "cross_entropy_spatial_target": (torch.nn.functional.cross_entropy,
                                     lambda: (torch.randn(2, 3, 1), torch.randint(0, 3, (2, 1)))),
    "cross_entropy_spatial_2d": (torch.nn.functional.cross_entropy,
                                 lambda: (torch.randn(4, 5, 3, 2), torch.randint(0, 5, (4, 3, 2)))),
    # logits of magnitude 5e3 in rows a persistent reduction holds: x - logsumexp rounded
    # the logsumexp (15x the tolerance near the row max); (x - max) - log(sum) does not
    "log_softmax_large_logits": (lambda x: torch.log_softmax(x, -1),
                                 lambda: (torch.linspace(-5e3, 5e3, 4000).repeat(3, 1),)),
}
# Cases the Triton interpreter cannot run (none now: its float -> bfloat16 cast truncated
# until codegen/triton/kernel.py's cast_text rounded it as a GPU does).
NO_INTERPRETER: set[str] = set()
TOL = {torch.float16: 1e-3, torch.bfloat16: 1.6e-2, torch.float64: 1e-7}


def _flat(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def compare(got: Any, expected: Any) -> str:
    out, exp = _flat(got), _flat(expected)
    if len(out) != len(exp):
        return f"{len(out)} outputs, eager {len(exp)}"
    for k, (o, e) in enumerate(zip(out, exp)):
        if not isinstance(o, torch.Tensor):
            return f"output {k} is {type(o).__name__}"
        if o.dtype != e.dtype or o.shape != e.shape or o.device != e.device:
            return f"output {k}: {o.dtype} {tuple(o.shape)} {o.device} vs eager " \
                   f"{e.dtype} {tuple(e.shape)} {e.device}"
        tol = TOL.get(e.dtype, 1e-5)
        if e.dtype.is_floating_point:
            if not torch.allclose(o, e, atol=tol, rtol=tol, equal_nan=True):
                return f"output {k} differs: {o.tolist()} vs {e.tolist()}"[:300]
        elif not torch.equal(o, e):
            return f"output {k} differs: {o.tolist()} vs {e.tolist()}"[:300]
    return "ok"


def check(name: str, backend_name: str) -> str:
    from kernelscope.compiler import backend

    fn, make = CASES[name]
    torch._dynamo.reset()
    torch.manual_seed(0)
    args = make()
    with torch.no_grad():
        expected = fn(*[a.clone() for a in args])
        got = torch.compile(fn, backend=backend, options={"backend": backend_name})(*args)
    return compare(got, expected)


def print_results(cases: Any, check_case: Callable[[str, str], str], backend_name: str,
                  skip: Any = ()) -> None:
    """The cases scripts' output: one `name result` line per case, whatever happened."""
    for case in cases:
        if case in skip:
            continue
        try:
            result = check_case(case, backend_name)
        except Exception as e:  # noqa: BLE001 - reported per case
            result = f"raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        print(f"{case} {result}", flush=True)


if __name__ == "__main__":
    be = sys.argv[1]
    print_results(CASES, check, be, NO_INTERPRETER if be == "triton" else ())
