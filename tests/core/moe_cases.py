"""The ops a mixture-of-experts router and its dispatch use, forward and backward: softmax
and sigmoid routers with topk, one_hot masks, nonzero / where (a graph break), scatter,
index_add, gathers of token rows, bincount, histc, sort, the inverse permutation, cumsum to
int32, grouped_mm (bfloat16: its meta takes no other dtype under torch.compile) and the two
dispatches Hugging Face writes (a loop over the experts hit; sort + grouped_mm).

`check(name, backend)` runs a case eagerly and compiled, gradients included (a fixed
cotangent per float output), and returns "ok fallbacks=<ops>" (the ops the compiler's
events say went to ATen, tests/fallback_events.py) or what differs. Run as a script
(`python moe_cases.py BACKEND`) it prints one line per case: the tests run it in-process
for C++ and in a subprocess under the Triton interpreter.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: fallback_events
sys.path.insert(0, str(Path(__file__).resolve().parent))
from correctness_cases import print_results  # noqa: E402
from fallback_events import compile_recorded, recording  # noqa: E402

E, T, TOP = 4, 32, 2  # experts, tokens, experts per token
Case = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]


def router(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixtral's: softmax over the experts, the top two renormalised."""
    v, i = torch.topk(torch.softmax(logits.float(), -1), TOP, -1)
    return v / v.sum(-1, keepdim=True), i


def sigmoid_router(logits: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """DeepSeek-V3's: sigmoid scores, chosen with a bias the weights do not carry."""
    scores = logits.sigmoid()
    i = torch.topk(scores + bias, TOP, -1).indices
    w = scores.gather(1, i)
    return w / w.sum(-1, keepdim=True), i


def expert_mask(i: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mask = F.one_hot(i, num_classes=E + 1).permute(2, 1, 0)
    return mask, mask.sum(dim=(-1, -2)) > 0


def experts_hit(i: torch.Tensor) -> torch.Tensor:
    mask = F.one_hot(i, num_classes=E + 1).permute(2, 1, 0)
    return torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()


def tokens_of_expert(i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.where(F.one_hot(i, num_classes=E).permute(2, 1, 0)[1])


def index_add_into_zeros(h: torch.Tensor, i: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(h)
    out.index_add_(0, i, src * 2)
    return out + h


def scatter_add_rows(h: torch.Tensor, i: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return h.scatter_add(0, i[:, None].expand(-1, h.shape[1]), src)


def scatter_rows(h: torch.Tensor, i: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    # One source row per target row: scatter's winner among duplicates is unspecified.
    return h.scatter(0, i[:, None].expand(-1, h.shape[1]), src)


def inverse_permutation(perm: torch.Tensor) -> torch.Tensor:
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.size(0))
    return inv


def grouped(x: torch.Tensor, w: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
    return F.grouped_mm(x.bfloat16(), w.bfloat16(), offs=offs).float()


def sorted_dispatch(h: torch.Tensor, logits: torch.Tensor, w1: torch.Tensor,
                    w2: torch.Tensor) -> torch.Tensor:
    """transformers' grouped_mm experts: sort the (token, expert) pairs by expert, count
    them with histc, one grouped_mm per projection, weight, and put the rows back."""
    v, i = router(logits)
    ids, perm = torch.sort(i.reshape(-1))
    rows = h[perm // TOP].bfloat16()
    offs = torch.cumsum(torch.histc(ids.float(), bins=E, min=0, max=E - 1), 0,
                        dtype=torch.int32)
    y = F.grouped_mm(F.silu(F.grouped_mm(rows, w1.bfloat16(), offs=offs)), w2.bfloat16(),
                     offs=offs).float()
    y = y * v.reshape(-1)[perm].unsqueeze(-1)
    return y[inverse_permutation(perm)].view(-1, TOP, y.shape[-1]).sum(1)


def looped_dispatch(h: torch.Tensor, logits: torch.Tensor, w1: torch.Tensor,
                    w2: torch.Tensor) -> torch.Tensor:
    """transformers' eager experts: a loop over the experts hit (nonzero: a graph break),
    each gathering its tokens, and index_add_ back."""
    v, i = router(logits)
    out = torch.zeros_like(h)
    with torch.no_grad():
        mask = F.one_hot(i, num_classes=E).permute(2, 1, 0)
        hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
    for e in hit:
        pos, tok = torch.where(mask[e[0]])
        y = F.silu(h[tok] @ w1[e[0]]) @ w2[e[0]]
        out.index_add_(0, tok, y * v[tok, pos, None])
    return out


def _ids() -> torch.Tensor:
    return torch.randint(0, E, (T, TOP))


def _leaf(*size: int) -> torch.Tensor:
    return torch.randn(*size, requires_grad=True)


def _dispatch_args() -> tuple[torch.Tensor, ...]:
    return _leaf(T, 16), _leaf(T, E), _leaf(E, 16, 32), _leaf(E, 32, 16)


CASES: dict[str, Case] = {
    "router_softmax_top2": (router, lambda: (_leaf(T, E),)),
    "router_sigmoid_biased": (sigmoid_router, lambda: (_leaf(T, 8), torch.randn(8))),
    "topk_of_saved_exp": (lambda x: torch.topk(x.exp(), 3, -1), lambda: (_leaf(64, 8),)),
    "one_hot_expert_mask": (expert_mask, lambda: (_ids(),)),
    "nonzero_experts_hit": (experts_hit, lambda: (_ids(),)),
    "where_tokens_of_expert": (tokens_of_expert, lambda: (_ids(),)),
    "index_add": (lambda h, i, s: h.index_add(0, i, s),
                  lambda: (_leaf(T, 8), _ids()[:, 0], _leaf(T, 8))),
    "index_add_into_zeros": (index_add_into_zeros,
                             lambda: (_leaf(T, 8), _ids()[:, 0], _leaf(T, 8))),
    "scatter_add_rows": (scatter_add_rows, lambda: (_leaf(E, 8), _ids()[:, 0], _leaf(T, 8))),
    "scatter_rows": (scatter_rows, lambda: (_leaf(E, 8), torch.randperm(E), _leaf(E, 8))),
    "gather_token_rows": (lambda h, i: h[i] * 2, lambda: (_leaf(T, 8), _ids().reshape(-1))),
    "gather_top_k_weights": (lambda w, t, p: w[t, p, None] * 3,
                             lambda: (_leaf(T, TOP), torch.randint(0, T, (20,)),
                                      torch.randint(0, TOP, (20,)))),
    "bincount": (lambda i: torch.bincount(i, minlength=E), lambda: (_ids().reshape(-1),)),
    "histc": (lambda i: torch.histc(i.float(), bins=E, min=0, max=E - 1),
              lambda: (_ids().reshape(-1),)),
    "sort_expert_ids": (lambda i: torch.sort(i.reshape(-1)), lambda: (_ids(),)),
    "sort_expert_ids_stable": (lambda i: torch.sort(i.reshape(-1), stable=True),
                               lambda: (_ids(),)),
    "argsort_scores": (lambda x: torch.argsort(x, -1, descending=True),
                       lambda: (torch.randn(4, 16),)),
    "inverse_permutation": (inverse_permutation, lambda: (torch.randperm(64),)),
    "cumsum_counts_int32": (lambda c: torch.cumsum(c, 0, dtype=torch.int32),
                            lambda: (torch.randint(0, 9, (E,)).float(),)),
    "cast_to_bf16": (lambda x: (x * 3).bfloat16(), lambda: (torch.randn(4096),)),
    "grouped_mm_bf16": (grouped, lambda: (_leaf(16, 16), _leaf(E, 16, 8),
                                          torch.tensor([3, 8, 8, 16], dtype=torch.int32))),
    "sorted_dispatch_bf16": (sorted_dispatch, _dispatch_args),
    "looped_dispatch": (looped_dispatch, _dispatch_args),
}
LOW_PRECISION = {"grouped_mm_bf16", "sorted_dispatch_bf16"}  # bf16 inside: 2e-2


def _flat(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def run(fn: Callable[..., Any], args: tuple[Any, ...]) -> list[torch.Tensor | None]:
    """The outputs, then each leaf's gradient for a fixed cotangent per float output."""
    outs = _flat(fn(*args))
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    floats = [o for o in outs if o.is_floating_point() and o.requires_grad]
    grads: list[torch.Tensor | None] = []
    if leaves and floats:
        gen = torch.Generator().manual_seed(1)
        cot = [torch.randn(o.shape, generator=gen) for o in floats]
        grads = list(torch.autograd.grad(floats, leaves, cot, allow_unused=True))
    return [o.detach() for o in outs] + grads


def differs(got: torch.Tensor | None, want: torch.Tensor | None, tol: float) -> str:
    if got is None or want is None:
        return "" if got is want else "a gradient is missing"
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{got.dtype} {tuple(got.shape)} vs eager {want.dtype} {tuple(want.shape)}"
    if not want.is_floating_point():
        return "" if torch.equal(got, want) else f"{int((got != want).sum())} elements"
    if torch.allclose(got, want, atol=tol, rtol=tol, equal_nan=True):
        return ""
    return f"max abs diff {float((got - want).abs().max()):.3g}"


def check(name: str, backend_name: str) -> str:
    fn, make = CASES[name]
    torch.manual_seed(0)
    args = make()

    def copies() -> tuple[Any, ...]:
        return tuple(a.detach().clone().requires_grad_(a.requires_grad)
                     if isinstance(a, torch.Tensor) else a for a in args)

    want = run(fn, copies())
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)) as rec:
        got = run(compile_recorded(fn, Path(tmp), backend=backend_name), copies())
    if len(got) != len(want):
        return f"{len(got)} results, eager {len(want)}"
    tol = 2e-2 if name in LOW_PRECISION else 1e-5
    bad = [f"result {k}: {why}" for k, (g, w) in enumerate(zip(got, want))
           if (why := differs(g, w, tol))]
    if bad:
        return "; ".join(bad)[:300]
    return "ok fallbacks=" + ",".join(f"{op}x{n}" for op, n in rec.by_op().items())


if __name__ == "__main__":
    print_results(CASES, check, sys.argv[1])
