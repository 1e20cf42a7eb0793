"""The gradient side of the OpInfo differential harness: outputs and input gradients.

In: an OpInfo entry with autograd support, a floating dtype, and one of its samples made
with `requires_grad=True`. Out: one `CaseResult` with the statuses of opinfo_harness
(native / fallback / mismatch / error / skip), now judged on the forward outputs *and* the
gradients of every input that requires grad.

As Inductor's `test_comprehensive` (`check_model(..., check_gradient=True)`): the outputs
that require grad are paired with random cotangents of unit norm, and
`torch.autograd.grad` gives the input gradients, eager against compiled. The compiled
backward is AOTAutograd's backward graph, compiled by Kernelscope when the gradient is
asked for (so its warnings, too, decide native vs fallback). A gradient autograd leaves
undefined is compared as zeros (`materialize_grads`): the same value, mathematically.
float16/bfloat16 gradients are judged against a float32 reference as the forward is.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from opinfo_harness import (
    DTYPES,
    RANDOM_OPS,
    RNG_STATE_OUTPUTS,
    UNINIT_OPS,
    CaseResult,
    Mismatch,
    _first_line,
    _make_fn,
    compare,
    op_key,
    samples,
    time_limit,
)
from torch.utils._pytree import tree_flatten


def grad_samples(op: Any, device: str, dtype: torch.dtype, n: int) -> list[Any]:
    """The op's first `n` samples with requires_grad=True on its differentiable inputs."""
    return samples(op, device, dtype, n, requires_grad=True)


# The reference a case is judged against where it differs from eager: the same op in a
# wider dtype. Gradients of float32 ops too (Inductor's fp64 reference): a backward such as
# logcumsumexp's rounds differently from eager's kernel, and the question is then which of
# the two is closer to the float64 answer, not whether they agree.
UPCAST = {torch.float16: torch.float32, torch.bfloat16: torch.float32,
          torch.float32: torch.float64}


def _widening(dtype: torch.dtype | None) -> dict[torch.dtype, torch.dtype]:
    """The dtypes a case of `dtype` widens (a float16 case: both 16-bit floats)."""
    if dtype is None:
        return {}
    return {d: w for d, w in UPCAST.items() if w == UPCAST[dtype]}


def _fresh(ts: list[torch.Tensor], upcast: torch.dtype | None = None) -> list[torch.Tensor]:
    """New leaves with the samples' values and requires_grad flags (a run's own copies)."""
    out = []
    for t in ts:
        if t.layout != torch.strided:
            out.append(t)
            continue
        c = t.detach().clone()
        wide = _widening(upcast)
        if c.dtype in wide:
            c = c.to(wide[c.dtype])
        out.append(c.requires_grad_(t.requires_grad))
    return out


def _differentiable(outputs: Any) -> list[torch.Tensor]:
    return [o for o in tree_flatten(outputs)[0]
            if isinstance(o, torch.Tensor) and o.requires_grad]


def cotangents(outputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Seeded random cotangents of unit norm, one per differentiable output (Inductor's)."""
    gen = torch.Generator().manual_seed(4321)
    grads = []
    for o in outputs:
        g = torch.randn(o.shape, generator=gen, dtype=torch.float64)
        norm = g.norm()
        g = g / norm if norm > 0 else g
        grads.append(g.to(dtype=o.dtype, device=o.device))
    return grads


def input_grads(outputs: list[torch.Tensor], inputs: list[torch.Tensor],
                grads: list[torch.Tensor]) -> list[torch.Tensor]:
    wanted = [t for t in inputs if t.requires_grad]
    if not wanted:
        return []
    return list(torch.autograd.grad(outputs, wanted, grads, allow_unused=True,
                                    materialize_grads=True))


def eager_step(fn: Callable[..., Any], tensors: list[torch.Tensor],
               upcast: torch.dtype | None = None
               ) -> tuple[Any, list[torch.Tensor]]:
    """Eager outputs and input gradients (in the wider dtype of UPCAST where `upcast`
    names the case's dtype)."""
    torch.manual_seed(1234)
    leaves = _fresh(tensors, upcast)
    out = fn(*leaves)
    diff = _differentiable(out)
    gs = cotangents(diff)
    wide = _widening(upcast)
    gs = [g.to(wide[g.dtype]) if g.dtype in wide else g for g in gs]
    return out, input_grads(diff, leaves, gs)


def compiled_step(fn: Callable[..., Any], tensors: list[torch.Tensor],
                  options: dict[str, Any]) -> tuple[Any, list[torch.Tensor], int, list[str]]:
    """Compiled outputs and input gradients; the graph count and every graph that ran
    eagerly (forward or backward), from Kernelscope's warnings."""
    from kernelscope.compiler import backend

    graphs = [0]

    def counting(gm: Any, example_inputs: Any) -> Any:
        graphs[0] += 1
        return backend(gm, example_inputs, options=options)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=counting, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(1234)
        leaves = _fresh(tensors)
        out = compiled(*leaves)
        diff = _differentiable(out)
        grads = input_grads(diff, leaves, cotangents(diff))
    eager = [str(w.message) for w in caught if "kernelscope: running graph" in str(w.message)]
    return out, grads, graphs[0], eager


def _requires_grad_pattern(out: Any) -> list[bool]:
    return [o.requires_grad for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]


def run_grad_case(op: Any, dtype_name: str, index: int, sample: Any, options: dict[str, Any],
                  timeout: float) -> CaseResult:
    """One sample: forward outputs and input gradients, fallback off, then on if needed."""
    key = op_key(op)
    start = time.perf_counter()
    random = key in RANDOM_OPS or op.name in RANDOM_OPS
    # Random ops' gradients depend on the draw (dropout's mask): shapes and dtypes only.
    kind = "random" if random else ("uninit" if op.name in UNINIT_OPS else "values")
    grad_kind = "uninit" if random or op.name in UNINIT_OPS else "values"

    def result(status: str, reason: str = "") -> CaseResult:
        return CaseResult(key, dtype_name, index, status, reason[:300],
                          round(time.perf_counter() - start, 3))

    fn, tensors = _make_fn(op, sample)
    if not any(t.requires_grad for t in tensors):
        return result("skip", "no input requires grad")
    try:
        expected, expected_grads = eager_step(fn, tensors)
    except Exception as e:  # noqa: BLE001 - eager rejects the sample (or its backward)
        return result("skip", f"eager raises {type(e).__name__}")
    if not _differentiable(expected):
        return result("skip", "no output requires grad")
    ref32: Any = None
    ref32_grads: Any = None
    if DTYPES[dtype_name] in UPCAST:
        try:
            ref32, ref32_grads = eager_step(fn, tensors, upcast=DTYPES[dtype_name])
        except Exception:  # noqa: BLE001 - no wider variant: compare with eager only
            ref32 = ref32_grads = None
    status, reason = "native", ""
    for fallback in (False, True):
        opts = {**options, "fallback": fallback}
        try:
            with time_limit(timeout):
                actual, actual_grads, graphs, eager_graphs = compiled_step(fn, tensors, opts)
        except Exception as e:  # noqa: BLE001 - any failure of ours is the result
            return result("error", f"{type(e).__name__}: {_first_line(e)}")
        try:
            compare(actual, expected, ref32, kind, RNG_STATE_OUTPUTS.get(key, set()))
            if _requires_grad_pattern(actual) != _requires_grad_pattern(expected):
                raise Mismatch(f"outputs requiring grad {_requires_grad_pattern(actual)}, "
                               f"eager {_requires_grad_pattern(expected)}")
            try:
                compare(actual_grads, expected_grads, ref32_grads, grad_kind)
            except Mismatch as e:
                raise Mismatch(f"grad of {str(e).replace('output', 'input', 1)}") from e
        except Mismatch as e:
            return result("mismatch", str(e))
        except Exception as e:  # noqa: BLE001 - comparing itself failed
            return result("error", f"compare: {type(e).__name__}: {_first_line(e)}")
        if graphs == 0:
            return result("fallback", "no graph captured (Dynamo ran it eagerly)")
        if not eager_graphs:
            return result(status, reason)
        status = "fallback"
        reason = eager_graphs[0].split(":", 1)[-1].strip()
        if fallback:
            return result("fallback", reason)
    return result(status, reason)
