"""What an extern (ATen) call returns for its inputs as this graph stores them.

Lowering plans each extern's output buffer before anything runs. The FX meta gives the
output strides for the inputs *as eager laid them out*; but some ATen kernels lay their
result out like an input (CPU flash attention: the output follows the query's dim order;
convolution: channels-last in, channels-last out), and the compiler may have stored that
input in another order (a graph output kept contiguous where eager had a strided view).
The planned strides must then follow the inputs we pass, or every kernel that reads the
result indexes it wrongly. So the op's meta function is run again, on fake tensors with
the stored inputs' sizes, strides, dtypes and devices, and its strides are the plan.

In: the op, its arguments with TensorArg in place of tensors and each TensorArg's dtype and
device. Out: the fake results (or None where the meta cannot run: the FX meta stands).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensorMode

from kernelscope.compiler.ir.nodes import ATTENTION_OPS, TensorArg


def needs_contiguous_last_dim(op: Any, size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """`op`'s kernel would misread an input stored with these strides: an attention
    kernel's, for a strided last dim (CPU flash attention's results are wrong, a ViT's head
    dim stored NHWC downstream of its patch embedding; CUDA's refuse it)."""
    return getattr(op, "overloadpacket", op) in ATTENTION_OPS and len(size) > 0 and \
        size[-1] > 1 and stride[-1] != 1


def restrided(op: Any, args: Any, kwargs: dict[str, Any],
              facts: dict[int, tuple[torch.dtype, str]], mode: FakeTensorMode) -> Any:
    """op(*args, **kwargs) on fake inputs laid out as stored; None if that fails."""
    def fake(v: Any) -> Any:
        if isinstance(v, TensorArg) and id(v) in facts:
            dtype, device = facts[id(v)]
            return torch.empty_strided(v.size, v.stride, dtype=dtype, device=device)
        return v

    try:
        with mode:
            fargs = torch.fx.node.map_aggregate(args, fake)
            fkwargs = torch.fx.node.map_aggregate(kwargs, fake)
            return op(*fargs, **fkwargs)
    except Exception:  # no meta kernel, a data-dependent op: the FX meta's strides stand
        return None


def stride_for(meta: torch.Tensor, actual: Any) -> tuple[int, ...]:
    """The strides to plan for one result: the re-run's where it agrees on size and dtype."""
    if isinstance(actual, torch.Tensor) and tuple(actual.shape) == tuple(meta.shape) and \
            actual.dtype == meta.dtype:
        return tuple(int(s) for s in actual.stride())
    return tuple(int(s) for s in meta.stride())
