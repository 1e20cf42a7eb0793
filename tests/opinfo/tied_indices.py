"""The indices of topk, kthvalue, median, nanmedian and mode, compared where they are defined.

Eager documents no index among equal values for these ops, and its kernels differ: CUDA's
radix select returns any of the tied elements (bfloat16 and float16 rows tie all the time),
the CPU's partial sort another. So an indices output that is not eager's is compared by
what it selects: the input's elements at our indices must equal those at eager's (NaN
matching NaN). Where a value occurs once in its row that is the same index; where it is
tied, any index of an equal value passes. The values output is compared as every output is.

In: the op's name, its sample (for dim and keepdim) and its input. Out: a checker the
harness's `compare` calls on the indices output, or None for other ops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# op name -> (position of dim in the sample's args, of keepdim; None: the op has none)
TIED_INDEX_OPS: dict[str, tuple[int, int | None]] = {
    "topk": (1, None), "kthvalue": (1, 2), "median": (0, 1), "nanmedian": (0, 1),
    "mode": (0, 1),
}
INDICES_OUTPUT = 1  # (values, indices)

Checker = Callable[[torch.Tensor, torch.Tensor], str | None]


def _arg(sample: Any, position: int | None, name: str, default: Any) -> Any:
    if name in sample.kwargs:
        return sample.kwargs[name]
    if position is not None and len(sample.args) > position:
        return sample.args[position]
    return default


def selected(x: torch.Tensor, index: torch.Tensor, dim: int, keepdim: bool) -> torch.Tensor:
    """x's elements at `index` along dim (indices shaped as the op returns them)."""
    if x.dim() == 0:
        return x.expand(index.shape).clone()
    d = dim % x.dim()
    i = index if keepdim else index.unsqueeze(d)
    out = x.gather(d, i)
    return out if keepdim else out.squeeze(d)


def checker(op_name: str, sample: Any) -> Checker | None:
    """For a tied-index op with an indices output: a function of (ours, eager's) indices
    that returns why they differ, or None where they select the same values."""
    if op_name not in TIED_INDEX_OPS or not isinstance(sample.input, torch.Tensor):
        return None
    dim_at, keep_at = TIED_INDEX_OPS[op_name]
    if op_name in ("median", "nanmedian") and _arg(sample, dim_at, "dim", None) is None:
        return None  # the whole-tensor form returns the value only
    dim = _arg(sample, dim_at, "dim", -1)
    keepdim = bool(_arg(sample, keep_at, "keepdim", op_name == "topk"))
    x = sample.input.detach().cpu()

    def check(ours: torch.Tensor, eager: torch.Tensor) -> str | None:
        a, b = ours.cpu(), eager.cpu()
        if torch.equal(a, b):
            return None
        va, vb = selected(x, a, dim, keepdim), selected(x, b, dim, keepdim)
        same = (va == vb) | (va.isnan() & vb.isnan()) if va.is_floating_point() else va == vb
        if bool(same.all()):
            return None
        return (f"{int((~same).sum())} of {a.numel()} indices select other values than "
                "eager's (not a tie)")

    return check
