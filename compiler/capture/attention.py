"""Attention written out by hand, recognised and sent to `scaled_dot_product_attention`.

    softmax(q @ k.transpose(-2, -1) / c, dim=-1) @ v               -> sdpa(q, k, v, scale=1/c)
    softmax((q @ k.mT * c).masked_fill(~ones(s, s).tril(), -inf)) @ v -> ... is_causal=True

The pass runs on Dynamo's graph (torch-level calls, before AOTAutograd), on CUDA graphs
only, the way Inductor's attention patterns do: on a GPU the fused kernel (flash or
memory-efficient attention) reads q, k and v once and never writes the scores, where the
naive form writes and re-reads an (s x s) matrix per head in fp32. Every intermediate must
have no other user and the shapes must be what SDPA takes (same head dim for q and k,
same length for k and v, one floating dtype). Each rewrite is described in the returned
list (and kept in `gm.meta["kernelscope_rewrites"]`) so it can be shown.

In: a torch.fx.GraphModule from Dynamo. Out: the same module, rewritten in place.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

MATMUL = {operator.matmul, torch.matmul}
SOFTMAX = {torch.softmax, F.softmax, torch.Tensor.softmax}


def _on_gpu(t: torch.Tensor) -> bool:
    return t.is_cuda


def _val(node: Any) -> Any:
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def _is(node: Any, targets: set[Any], method: str | None = None) -> bool:
    if not isinstance(node, torch.fx.Node):
        return False
    if node.op == "call_function" and node.target in targets:
        return True
    return method is not None and node.op == "call_method" and node.target == method


def _only_user(node: Any) -> bool:
    return len(node.users) == 1


def _last_two(dims: tuple[Any, ...], ndim: int) -> bool:
    return len(dims) == 2 and {d % ndim for d in dims if isinstance(d, int)} == \
        {ndim - 2, ndim - 1}


def _transposed_k(node: Any) -> Any:
    """k from k.transpose(-2, -1) / torch.transpose(k, -2, -1) / k.mT, else None."""
    if not isinstance(node, torch.fx.Node) or not _only_user(node):
        return None
    k = node.args[0] if node.args else None
    v = _val(k)
    if v is None:
        return None
    if _is(node, {torch.transpose}, "transpose") and _last_two(tuple(node.args[1:3]), v.dim()):
        return k
    if node.op == "call_function" and node.target is getattr and node.args[1] == "mT":
        return k
    return None


def _scale(node: Any) -> tuple[Any, float]:
    """(scores, scale) for scores / c or scores * c (c a Python number), else (node, 1)."""
    if _is(node, {operator.truediv, torch.div}, "div") and isinstance(node.args[1],
                                                                      (int, float)):
        a = node.args[0]
        if isinstance(a, torch.fx.Node) and _only_user(a) and node.args[1] != 0:
            return a, 1.0 / float(node.args[1])
    if _is(node, {operator.mul, torch.mul}, "mul") and isinstance(node.args[1], (int, float)):
        a = node.args[0]
        if isinstance(a, torch.fx.Node) and _only_user(a):
            return a, float(node.args[1])
    return node, 1.0


def _causal_mask(node: Any, s: int) -> bool:
    """~torch.ones(s, s, dtype=bool).tril() (diagonal 0), built in the graph."""
    if not _is(node, {operator.invert, torch.bitwise_not, torch.logical_not}, "logical_not"):
        return False
    tril = node.args[0]
    if not _is(tril, {torch.tril}, "tril") or len(tril.args) > 1 or tril.kwargs.get(
            "diagonal", 0) != 0:
        return False
    ones = tril.args[0]
    v = _val(ones)
    return (_is(ones, {torch.ones}) and v is not None and tuple(v.shape) == (s, s)
            and v.dtype == torch.bool)


def _match(out: Any) -> dict[str, Any] | None:
    if not _is(out, MATMUL) or len(out.args) != 2:
        return None
    probs, v = out.args
    if not _is(probs, SOFTMAX, "softmax") or not _only_user(probs):
        return None
    dim = probs.args[1] if len(probs.args) > 1 else probs.kwargs.get("dim")
    if probs.kwargs.get("dtype") is not None or len(probs.args) > 2:
        return None
    x: Any = probs.args[0]
    xv = _val(x)
    if not isinstance(x, torch.fx.Node) or xv is None or not isinstance(dim, int) or \
            dim % xv.dim() != xv.dim() - 1 or not _only_user(x):
        return None
    causal = False
    chain: list[Any] = [out, probs, x]
    if _is(x, {torch.masked_fill}, "masked_fill"):
        s = xv.shape[-1]
        if len(x.args) != 3 or x.args[2] != -math.inf or not _causal_mask(x.args[1], s) \
                or xv.shape[-2] != s:
            return None
        mask: Any = x.args[1]
        chain += [mask, mask.args[0], mask.args[0].args[0]]
        causal, x = True, x.args[0]
        if not isinstance(x, torch.fx.Node) or not _only_user(x):
            return None
        chain.append(x)
    scores, scale = _scale(x)
    chain += [scores, scores.args[1] if isinstance(scores, torch.fx.Node) and scores.args
              else None]
    if not _is(scores, MATMUL) or len(scores.args) != 2:
        return None
    q, kt = scores.args
    k = _transposed_k(kt)
    qv, kv, vv = _val(q), _val(k), _val(v)
    if k is None or qv is None or kv is None or vv is None:
        return None
    if not (qv.dim() == kv.dim() == vv.dim() and qv.dim() in (3, 4)):
        return None
    if qv.shape[-1] != kv.shape[-1] or kv.shape[-2] != vv.shape[-2] or \
            qv.shape[:-2] != kv.shape[:-2] or kv.shape[:-2] != vv.shape[:-2]:
        return None
    if not (qv.dtype == kv.dtype == vv.dtype and qv.dtype.is_floating_point):
        return None
    if not all(_on_gpu(t) for t in (qv, kv, vv)):
        return None
    return {"q": q, "k": k, "v": v, "scale": scale, "causal": causal, "chain": chain}


def rewrite_attention(gm: torch.fx.GraphModule) -> list[str]:
    """Replace every naive attention in `gm` with scaled_dot_product_attention."""
    done: list[str] = []
    for node in list(gm.graph.nodes):
        m = _match(node)
        if m is None:
            continue
        with gm.graph.inserting_before(node):
            sdpa = gm.graph.call_function(
                F.scaled_dot_product_attention, (m["q"], m["k"], m["v"]),
                {"is_causal": m["causal"], "scale": m["scale"]})
        sdpa.meta = dict(node.meta)
        node.replace_all_uses_with(sdpa)
        erased: set[int] = set()
        for dead in m["chain"]:  # only the matched nodes, never other side effects
            if isinstance(dead, torch.fx.Node) and id(dead) not in erased and not dead.users:
                gm.graph.erase_node(dead)
                erased.add(id(dead))
        done.append(f"{node.name}: softmax(q @ k^T * {m['scale']:.6g}"
                    f"{', causal mask' if m['causal'] else ''}) @ v -> "
                    "scaled_dot_product_attention")
    if done:
        gm.graph.lint()
        gm.recompile()
        gm.meta["kernelscope_rewrites"] = done
    return done
