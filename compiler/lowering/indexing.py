"""Indirect loads: embedding, index, gather, index_select.

The loaded index value becomes a sympy symbol through `ops.indirect_indexing`, so the
rest of the index arithmetic stays symbolic and the kernel loads `x[tmp3 * 64 + i1]`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.fx import Node

from kernelscope.compiler.ir.nodes import Index, TensorValue
from kernelscope.compiler.ir.ops import ops
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.reductions import reduce
from kernelscope.compiler.lowering.registry import aten, register_lowering
from kernelscope.compiler.lowering.scatter import too_costly


def _indirect(value: Any, size: int) -> Any:
    """Wrap negative indices, then turn the value into an index symbol."""
    zero = ops.constant(0, torch.int64)
    v = ops.to_dtype(value, torch.int64)
    v = ops.where(ops.lt(v, zero), ops.add(v, ops.constant(size, torch.int64)), v)
    return ops.indirect_indexing(v, size)


@register_lowering(aten.embedding)
def embedding(g: LoweringContext, node: Node, weight: TensorValue, indices: TensorValue, *args: Any
             ) -> Any:
    meta = out_meta(node)
    lw, li = weight.loader(), indices.loader()
    nidx = len(indices.size)

    def inner(idx: Index) -> Any:
        row = _indirect(li(idx[:nidx]), weight.size[0])
        return lw([row, *idx[nidx:]])

    return g.lazy(node, inner, tuple(meta.shape), weight.dtype, [weight, indices])


Position = Callable[[Index, Callable[[Index], Any]], tuple[list[Any], Any]]


def _along(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue,
           position: Position) -> Any:
    """x read along `dim` at an index loaded from `index` (index_select, gather):
    `position(idx, load_index)` gives x's coordinates and the loaded index for `dim`."""
    meta = out_meta(node)
    dim = dim + len(x.size) if dim < 0 else dim
    lx, li = x.loader(), index.loader()
    if not x.size:  # a 0-d input: the only valid index is 0
        return g.lazy(node, lambda idx: lx([]), tuple(meta.shape), x.dtype, [x])

    def inner(idx: Index) -> Any:
        src, at = position(idx, li)
        src[dim] = _indirect(at, x.size[dim])
        return lx(src)

    return g.lazy(node, inner, tuple(meta.shape), x.dtype, [x, index])


@register_lowering(aten.index_select)
def index_select(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue
                ) -> Any:
    d = dim + len(x.size) if dim < 0 else dim
    return _along(g, node, x, dim, index,
                  lambda idx, li: (list(idx), li([idx[d]] if index.size else [])))


@register_lowering(aten.gather)
def gather(g: LoweringContext, node: Node, x: TensorValue, dim: int, index: TensorValue, **kw: Any
          ) -> Any:
    # A 0-d index reads like a one-element index of x's rank (eager's rule).
    return _along(g, node, x, dim, index,
                  lambda idx, li: (list(idx) if idx else [0] * len(x.size), li(idx)))


@register_lowering(aten.index.Tensor)
def index(g: LoweringContext, node: Node, x: TensorValue, indices: Sequence[Any]) -> Any:
    """x[i0, i1, ...] with adjacent index tensors (others fall back to ATen)."""
    meta = out_meta(node)
    positions = [k for k, t in enumerate(indices) if t is not None]
    if not positions or positions != list(range(positions[0], positions[-1] + 1)):
        return g.extern(node, node.target, (x, indices), {}, fallback=True,
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

    return g.lazy(node, inner, tuple(meta.shape), x.dtype, [x, *tensors])


def _bag_member(lo: Any, li: Any, n: int, nofs: int, padding_idx: int
                ) -> Callable[[Any, Any], Any]:
    """`member(b, j)`: whether index j is in bag b (offsets[b] <= j < offsets[b + 1], the
    last bag ending at n) and is not padding_idx."""
    i64 = torch.int64

    def member(b: Any, j: Any) -> Any:
        jv = ops.index_expr(j, i64)
        start = lo([b])
        last = ops.ge(ops.index_expr(b + 1, i64), ops.constant(nofs, i64))
        end = ops.where(last, ops.constant(n, i64),
                        ops.masked(ops.logical_not(last), lambda: lo([b + 1]), 0))
        inside = ops.logical_and(ops.ge(jv, start), ops.lt(jv, end))
        if padding_idx >= 0:
            inside = ops.logical_and(inside, ops.ne(ops.to_dtype(li([j]), i64),
                                                    ops.constant(padding_idx, i64)))
        return inside

    return member


@register_lowering(aten._embedding_bag_forward_only, aten._embedding_bag)
def embedding_bag(g: LoweringContext, node: Node, weight: TensorValue, indices: TensorValue,
                  offsets: TensorValue, scale_grad_by_freq: bool = False, mode: int = 0,
                  sparse: bool = False, per_sample_weights: Any = None,
                  include_last_offset: bool = False, padding_idx: int = -1) -> Any:
    """Bags of rows, summed or averaged: out[b] reduces weight[indices[j]] (times
    per_sample_weights[j]) over offsets[b] <= j < offsets[b + 1], skipping padding_idx.
    Only the bags themselves are lowered; the bookkeeping outputs (offset2bag, bag sizes,
    max indices) go to ATen when something reads them."""
    args = (weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
            include_last_offset, padding_idx)
    extra = any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users)
    why = "max mode" if mode == 2 else "its bookkeeping outputs are used" if extra else \
        "2-d indices" if len(indices.size) != 1 else ""
    if why:
        return g.extern(node, node.target, args, {}, fallback=True, reason=why)
    n, nbags, dim = indices.numel(), out_meta(node)[0].shape[0], weight.size[1]
    big = too_costly(g, node, nbags * dim, n, args, {})
    if big is not None:
        return big
    out = out_meta(node)[0].dtype
    lw, li, lo = weight.loader(), indices.loader(), offsets.loader()
    lp = per_sample_weights.loader() if per_sample_weights is not None else None
    member = _bag_member(lo, li, n, offsets.numel(), padding_idx)

    def term(idx: Any) -> Any:
        b, d, j = idx
        hit = member(b, j)

        def row() -> Any:
            v = lw([_indirect(li([j]), weight.size[0]), d])
            return ops.mul(v, lp([j])) if lp is not None else v

        return ops.where(hit, ops.masked(hit, row, 0), ops.constant(0, out))

    terms = g.lazy(node, term, [nbags, dim, n], out, [weight, indices, offsets])
    total = reduce(g, node, terms, [2], False, "sum", out, out)
    bags: TensorValue
    if mode == 0:
        bags = total
    else:
        count = reduce(g, node, g.lazy(node, lambda idx: ops.to_dtype(member(idx[0], idx[2]), out),
                                 [nbags, dim, n], out, [indices, offsets]),
                       [2], False, "sum", out, out)
        lt, lc = total.loader(), count.loader()

        def mean(idx: Any) -> Any:
            c = lc(idx)
            return ops.where(ops.gt(c, ops.constant(0, out)), ops.truediv(lt(idx), c),
                             ops.constant(0, out))

        bags = g.lazy(node, mean, [nbags, dim], out, [total, count])
    return (bags, None, None, None)
