"""Indirect loads: embedding, index, gather, index_select.

The loaded index value becomes a sympy symbol through `ops.indirect_indexing`, so the
rest of the index arithmetic stays symbolic and the kernel loads `x[tmp3 * 64 + i1]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from compiler.ir.nodes import Index, TensorValue
from compiler.ir.ops import ops
from compiler.lowering.registry import aten, register_lowering


def _indirect(value: Any, size: int) -> Any:
    """Wrap negative indices, then turn the value into an index symbol."""
    zero = ops.constant(0, torch.int64)
    v = ops.to_dtype(value, torch.int64)
    v = ops.where(ops.lt(v, zero), ops.add(v, ops.constant(size, torch.int64)), v)
    return ops.indirect_indexing(v, size)


@register_lowering(aten.embedding)
def embedding(g: Any, weight: TensorValue, indices: TensorValue, *args: Any) -> Any:
    meta = g.out_meta()
    lw, li = weight.loader(), indices.loader()
    nidx = len(indices.size)

    def inner(idx: Index) -> Any:
        row = _indirect(li(idx[:nidx]), weight.size[0])
        return lw([row, *idx[nidx:]])

    return g.lazy(inner, tuple(meta.shape), weight.dtype, [weight, indices])


@register_lowering(aten.index_select)
def index_select(g: Any, x: TensorValue, dim: int, index: TensorValue) -> Any:
    meta = g.out_meta()
    dim = dim + len(x.size) if dim < 0 else dim
    lx, li = x.loader(), index.loader()
    if not x.size:  # a 0-d input: the only valid index is 0
        return g.lazy(lambda idx: lx([]), tuple(meta.shape), x.dtype, [x])

    def inner(idx: Index) -> Any:
        src = list(idx)
        src[dim] = _indirect(li([idx[dim]] if index.size else []), x.size[dim])
        return lx(src)

    return g.lazy(inner, tuple(meta.shape), x.dtype, [x, index])


@register_lowering(aten.gather)
def gather(g: Any, x: TensorValue, dim: int, index: TensorValue, **kw: Any) -> Any:
    meta = g.out_meta()
    dim = dim + len(x.size) if dim < 0 else dim
    lx, li = x.loader(), index.loader()

    def inner(idx: Index) -> Any:
        src = list(idx)
        src[dim] = _indirect(li(idx), x.size[dim])
        return lx(src)

    return g.lazy(inner, tuple(meta.shape), x.dtype, [x, index])


@register_lowering(aten.index.Tensor)
def index(g: Any, x: TensorValue, indices: Sequence[Any]) -> Any:
    """x[i0, i1, ...] with adjacent index tensors (others fall back to ATen)."""
    meta = g.out_meta()
    positions = [k for k, t in enumerate(indices) if t is not None]
    if not positions or positions != list(range(positions[0], positions[-1] + 1)):
        return g.extern(g.current.target, (x, indices), {}, fallback=True,
                        reason="non-adjacent advanced indices")
    tensors = [indices[k] for k in positions]
    bshape = list(torch.broadcast_shapes(*[tuple(t.size) for t in tensors]))
    first, nb = positions[0], len(bshape)
    loaders = [t.loader() for t in tensors]
    lx = x.loader()

    def inner(idx: Index) -> Any:
        bidx = idx[first:first + nb]
        src = list(idx[:first])
        for t, load, k in zip(tensors, loaders, positions):
            lead = nb - len(t.size)
            sub = [0 if t.size[j] == 1 else bidx[lead + j] for j in range(len(t.size))]
            src.append(_indirect(load(sub), x.size[k]))
        src += list(idx[first + nb:])
        return lx(src)

    return g.lazy(inner, tuple(meta.shape), x.dtype, [x, *tensors])
