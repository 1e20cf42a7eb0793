"""Regression cases for the structural lowerings (scatter family, scans, pools, max/min
with indices, empty): each must be lowered natively (the ATen fallback off) and give
eager's answer, on C++ and under the Triton interpreter.

`check(name, backend)` returns "ok", "not native: <reason>" or the mismatch. Run as a
script (`python structured_cases.py BACKEND`) it prints one line per case: the tests run
it in-process for C++ and in a subprocess under the Triton interpreter.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from correctness_cases import compare, print_results  # noqa: E402

NAN, INF = float("nan"), float("inf")
Case = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]


def _i(*v: int) -> torch.Tensor:
    return torch.tensor(v)


def _setitem_mask(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[y > 0] = v
    return y


CASES: dict[str, Case] = {
    # index_put: duplicates accumulate, negative indices wrap, masks with one value
    "index_put_accumulate_duplicates": (
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (torch.randn(4, 3), _i(0, 2, 0, -1), torch.randn(4, 3))),
    "index_put_negative_two_dims": (
        lambda x, i, j, v: torch.index_put(x, (i, j), v),
        lambda: (torch.randn(3, 4, 2), _i(-1, 1), _i(0, -2), torch.randn(2, 2))),
    "index_put_bool_mask_row": (
        lambda x, m, v: torch.index_put(x, (m,), v, accumulate=True),
        lambda: (torch.randn(5, 3), torch.tensor([True, False, True, True, False]),
                 torch.randn(3))),
    "setitem_mask_tensor_value": (_setitem_mask, lambda: (torch.randn(4, 4), torch.tensor(0.5))),
    "index_add_dim1": (lambda x, i, s: x.index_add(1, i, s, alpha=2.0),
                       lambda: (torch.randn(3, 4), _i(2, 0, 2), torch.randn(3, 3))),
    "index_copy": (lambda x, i, s: x.index_copy(0, i, s),
                   lambda: (torch.randn(4, 2), _i(3, 1), torch.randn(2, 2))),
    "put_negative_accumulate": (lambda x, i, s: x.put(i, s, accumulate=True),
                                lambda: (torch.randn(2, 3), _i(-1, 0, 5, -1), torch.randn(4))),
    # scatter family (index smaller than self: outputs outside it keep self)
    "scatter_src_small_index": (lambda x, i, s: x.scatter(1, i, s),
                                lambda: (torch.randn(3, 4), torch.tensor([[2, 0]]),
                                         torch.randn(2, 3))),
    "scatter_value": (lambda x, i: x.scatter(0, i, 7.5),
                      lambda: (torch.randn(3, 3), torch.tensor([[1, 0, 2]]))),
    "scatter_add_duplicates": (lambda x, i, s: x.scatter_add(0, i, s),
                               lambda: (torch.randn(3, 2), torch.tensor([[0, 1], [0, 1], [2, 1]]),
                                        torch.randn(3, 2))),
    "scatter_reduce_amax_nan": (
        lambda x, i, s: x.scatter_reduce(0, i, s, "amax", include_self=False),
        lambda: (torch.randn(4), _i(0, 0, 2, 2), torch.tensor([1.0, NAN, -2.0, 3.0]))),
    "scatter_reduce_amin_self_nan": (
        lambda x, i, s: x.scatter_reduce(0, i, s, "amin"),
        lambda: (torch.tensor([0.0, NAN, 2.0, 9.0]), _i(1, 1, 3), torch.tensor([4.0, -1.0, 5.0]))),
    "scatter_reduce_mean_int": (
        lambda x, i, s: x.scatter_reduce(0, i, s, "mean", include_self=True),
        lambda: (torch.tensor([1, 4, 7, 3]), _i(0, 0, 2), torch.tensor([2, -6, 5]))),
    "scatter_reduce_prod_no_self": (
        lambda x, i, s: x.scatter_reduce(1, i, s, "prod", include_self=False),
        lambda: (torch.randn(2, 3), torch.tensor([[0, 0, 1]]), torch.randn(1, 3))),
    "index_reduce_mean": (lambda x, i, s: x.index_reduce(0, i, s, "mean"),
                          lambda: (torch.randn(3, 2), _i(1, 1, 0), torch.randn(3, 2))),
    "index_reduce_amax_no_self": (
        lambda x, i, s: x.index_reduce(0, i, s, "amax", include_self=False),
        lambda: (torch.randn(3, 2), _i(2, 2, 0), torch.randn(3, 2))),
    "masked_scatter": (lambda x, m, s: x.masked_scatter(m, s),
                       lambda: (torch.randn(3, 4), torch.rand(3, 4) > 0.5, torch.randn(12))),
    "diagonal_scatter_negative": (lambda x, s: torch.diagonal_scatter(x, s, -1),
                                  lambda: (torch.randn(4, 3), torch.randn(3))),
    "diagonal_scatter_dims": (lambda x, s: torch.diagonal_scatter(x, s, 1, 2, 0),
                              lambda: (torch.randn(3, 2, 4), torch.randn(2, 2))),
    "as_strided_scatter": (lambda x, s: torch.as_strided_scatter(x, s, (2, 2), (1, 3), 1),
                           lambda: (torch.randn(3, 3), torch.randn(2, 2))),
    "slice_scatter_step": (lambda x, s: torch.slice_scatter(x, s, 1, 1, 6, 2),
                           lambda: (torch.randn(2, 7), torch.randn(2, 3))),
    # scans
    "cumsum_int_to_int64": (lambda x: x.cumsum(1), lambda: (torch.randint(-9, 9, (3, 5)),)),
    "cumsum_bool": (lambda x: x.cumsum(0), lambda: (torch.tensor([True, False, True]),)),
    "cumprod_dim0": (lambda x: x.cumprod(0), lambda: (torch.randn(4, 3),)),
    "cumsum_0d": (lambda x: x.cumsum(0), lambda: (torch.tensor(2.5),)),
    "logcumsumexp_infs": (lambda x: x.logcumsumexp(1),
                          lambda: (torch.tensor([[-INF, -INF, 1.0, INF, 2.0],
                                                 [3.0, NAN, 1.0, -1.0, 0.0]]),)),
    "cummax_ties_nan": (lambda x: torch.cummax(x, 1),
                        lambda: (torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0],
                                               [1.0, NAN, 3.0, NAN, 2.0]]),)),
    "cummin_ties": (lambda x: torch.cummin(x, 0), lambda: (torch.tensor([2, 1, 1, 3, 1]),)),
    # max/min with and without dim
    "max_dim_nan_first_index": (lambda x: torch.max(x, 0),
                                lambda: (torch.tensor([1.0, NAN, 3.0, NAN]),)),
    "min_dim_keepdim_ties": (lambda x: torch.min(x, 1, keepdim=True),
                             lambda: (torch.tensor([[2.0, 1.0, 1.0], [0.0, 5.0, 0.0]]),)),
    "max_min_bool": (lambda x: (*torch.max(x, 1), *torch.min(x, 0), torch.max(x)),
                     lambda: (torch.tensor([[False, True, True], [False, False, False]]),)),
    "max_all": (lambda x: torch.max(x), lambda: (torch.randn(3, 4),)),
    # pools, norms, distances through their decompositions
    "max_pool2d_indices": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
                           lambda: (torch.randn(1, 2, 7, 6),)),
    "max_pool2d_nan_last_index": (
        lambda x: F.max_pool2d(x, (1, 4), return_indices=True),
        lambda: (torch.tensor([[[[1.0, NAN, NAN, 2.0, -INF, -INF, -INF, -INF]]]]),)),
    "max_pool2d_all_neg_inf_padded": (
        lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True),
        lambda: (torch.full((1, 1, 3, 3), -INF),)),
    "max_pool3d_dilation_ceil": (
        lambda x: F.max_pool3d(x, 2, 2, 1, 2, ceil_mode=True, return_indices=True),
        lambda: (torch.randn(1, 2, 5, 4, 5),)),
    "max_pool1d_int": (lambda x: F.max_pool1d(x.float(), 2).long() + x[..., :3],
                       lambda: (torch.randint(-5, 5, (2, 6)),)),
    "avg_pool2d_ceil_no_pad_count": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        lambda: (torch.randn(2, 3, 6, 7),)),
    "avg_pool2d_divisor": (lambda x: F.avg_pool2d(x, 2, 1, 1, divisor_override=3),
                           lambda: (torch.randn(1, 2, 4, 4),)),
    "avg_pool3d_pad": (lambda x: F.avg_pool3d(x, 3, 2, 1), lambda: (torch.randn(1, 2, 5, 6, 4),)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
                            lambda: (torch.randn(2, 7, 5),)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)),
                            lambda: (torch.randn(1, 2, 5, 7, 6),)),
    "adaptive_max_pool2d_uneven_nan": (
        lambda x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True),
        lambda: (torch.tensor([[[1.0, NAN, 3.0, 0.0, NAN], [4.0, 4.0, -1.0, 2.0, 2.0],
                                [0.0, 1.0, 5.0, 5.0, -3.0]]]),)),
    "vector_norm_orders": (lambda x: (torch.linalg.vector_norm(x, 3, 1),
                                      torch.linalg.vector_norm(x, INF), torch.dist(x, x * 2)),
                           lambda: (torch.randn(3, 4),)),
    "repeat": (lambda x: x.repeat(2, 1, 3), lambda: (torch.randn(2, 3),)),
    "sort_stable_nan_ties": (lambda x: torch.sort(x, dim=1, stable=True),
                             lambda: (torch.tensor([[3.0, NAN, 1.0, 3.0, NAN, -INF]]),)),
    "sort_descending_dim0": (lambda x: torch.sort(x, 0, descending=True),
                             lambda: (torch.randn(5, 3),)),
    "argsort_int": (lambda x: torch.argsort(x, stable=True), lambda: (_i(4, 1, 4, 0, 1),)),
    "topk_smallest": (lambda x: torch.topk(x, 2, 0, largest=False), lambda: (torch.randn(6, 2),)),
    "kthvalue_keepdim": (lambda x: torch.kthvalue(x, 3, 1, keepdim=True),
                         lambda: (torch.randn(2, 5),)),
    "median_dim_nan_first": (lambda x: torch.median(x, 1),
                             lambda: (torch.tensor([[3.0, NAN, 1.0, NAN], [4.0, 2.0, 8.0, 1.0]]),)),
    "nanmedian_all": (lambda x: torch.nanmedian(x),
                      lambda: (torch.tensor([[3.0, NAN, 1.0], [NAN, 2.0, 7.0]]),)),
    "frexp_empty_two_outputs": (torch.frexp, lambda: (torch.randn(0, 3),)),
    "sort_empty_two_outputs": (lambda x: torch.sort(x, 1), lambda: (torch.randn(0, 3),)),
    "cumsum_bool_prefix_identity": (lambda x: x.cumprod(0) + x.cumsum(0),
                                    lambda: (torch.tensor([True, True, False, True]),)),
    "sort_0d": (lambda x: torch.sort(x), lambda: (torch.tensor(1.5),)),
    "searchsorted_sides": (lambda s, v: (torch.searchsorted(s, v),
                                         torch.searchsorted(s, v, right=True)),
                           lambda: (torch.tensor([1.0, 2.0, 2.0, 5.0]),
                                    torch.tensor([[0.0, 2.0, NAN], [5.0, 6.0, 1.5]]))),
    "addbmm": (lambda x, a, b: torch.addbmm(x, a, b, beta=0.5, alpha=2.0),
               lambda: (torch.randn(3, 5), torch.randn(4, 3, 2), torch.randn(4, 2, 5))),
    "addbmm_beta0_ignores_nan": (lambda x, a, b: torch.addbmm(x, a, b, beta=0),
                                 lambda: (torch.full((3, 5), NAN), torch.randn(2, 3, 2),
                                          torch.randn(2, 2, 5))),
    "cdist_orders": (lambda a, b: (torch.cdist(a, b, 0.0), torch.cdist(a, b, 1.0),
                                   torch.cdist(a, b, 3.0), torch.cdist(a, b, INF),
                                   torch.cdist(a, b)),
                     lambda: (torch.randn(2, 4, 3), torch.randn(1, 5, 3))),
    "embedding_bag_sum_weights": (
        lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
        lambda: (torch.randn(10, 4), _i(1, 2, 4, 5, 4, 9), _i(0, 2, 2), torch.randn(6))),
    "embedding_bag_mean_padding_last_offset": (
        lambda w, i, o: F.embedding_bag(i, w, o, mode="mean", padding_idx=4,
                                        include_last_offset=True),
        lambda: (torch.randn(10, 3), _i(1, 4, 4, 5, 4, 9), _i(0, 2, 3, 6))),
    "bilinear": (F.bilinear, lambda: (torch.randn(6, 3), torch.randn(6, 4), torch.randn(5, 3, 4),
                                      torch.randn(5))),
    "max_pool2d_backward": (
        lambda x, g: torch.ops.aten.max_pool2d_with_indices_backward(
            g, x, [2, 2], [1, 1], [1, 1], [1, 1], False,
            F.max_pool2d(x, 2, 1, 1, return_indices=True)[1]),
        lambda: (torch.randn(1, 2, 4, 5), torch.randn(1, 2, 5, 6))),
}


def check(name: str, backend_name: str) -> str:
    from kernelscope.compiler import backend

    fn, make = CASES[name]
    torch._dynamo.reset()
    torch.manual_seed(0)
    args = make()
    expected = fn(*[a.clone() for a in args])
    compiled = torch.compile(fn, backend=backend,
                             options={"backend": backend_name, "fallback": False})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compiled(*args)
    eager = [str(w.message) for w in caught if "kernelscope: running graph" in str(w.message)]
    if eager:
        return "not native: " + eager[0][:200]
    return compare(got, expected)


if __name__ == "__main__":
    print_results(CASES, check, sys.argv[1])
