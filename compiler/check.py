"""The `run` stage's judgement: is a compiled graph's output the eager graph's output?

In: the compiled outputs, the graph, its inputs and the options. Out: one record per
output (shape, dtype, errors, the tolerance used, ok). Tolerances are per dtype, as
Inductor's `check_model` does: float64 closely, float32 at the options' atol/rtol, and
float16 / bfloat16 against a float32 reference: the same graph interpreted with every
low-precision tensor widened to float32 before each op (explicit casts still round),
its outputs rounded back to their dtype once. Integers and booleans must be equal.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from kernelscope.compiler.events.stage import finite
from kernelscope.compiler.events.types import OutputCheck
from kernelscope.compiler.options import CompileOptions

LOW_PRECISION = (torch.float16, torch.bfloat16)
FIXED: dict[torch.dtype, tuple[float, float]] = {  # (atol, rtol); float32 from the options
    torch.float64: (1e-7, 1e-7),
    torch.complex128: (1e-7, 1e-7),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1.6e-2),
}


def tolerance(dtype: torch.dtype, options: CompileOptions) -> tuple[float, float]:
    return FIXED.get(dtype, (options.atol, options.rtol))


class _Widened(torch.fx.Interpreter):
    """Runs a graph with float16/bfloat16 tensors widened to float32 at every op."""

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        def widen(a: Any) -> Any:
            if isinstance(a, torch.Tensor) and a.dtype in LOW_PRECISION:
                return a.float()
            return a

        if target is torch.ops.aten.view.dtype:  # a bitcast means its exact bits
            return super().call_function(target, args, kwargs)
        args, kwargs = pytree.tree_map(widen, (args, kwargs))
        return super().call_function(target, args, kwargs)


def reference(gm: torch.fx.GraphModule, inputs: list[Any]) -> tuple[list[Any], str]:
    """The outputs to compare against, and how they were computed."""
    eager = pytree.tree_leaves(gm(*inputs))
    low = any(isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION
              for t in [*inputs, *eager])
    if not low:
        return eager, "the captured ATen graph run eagerly"
    try:
        wide = pytree.tree_leaves(_Widened(gm).run(*inputs))
    except Exception:  # an op that cannot run widened: the plain eager graph it is
        return eager, "the captured ATen graph run eagerly (float32 reference failed)"
    if len(wide) != len(eager):
        return eager, "the captured ATen graph run eagerly"
    out = [w.to(e.dtype) if isinstance(w, torch.Tensor) and isinstance(e, torch.Tensor)
           else e for w, e in zip(wide, eager)]
    return out, "the captured ATen graph run in float32, rounded to each output's dtype"


def compare_outputs(out: Any, ref: list[Any], options: CompileOptions) -> dict[str, Any]:
    """{"ok": every output as eager's, "outputs": one OutputCheck per output}."""
    outs = pytree.tree_leaves(out)
    results: list[OutputCheck] = []
    ok = len(outs) == len(ref)
    for i, (o, r) in enumerate(zip(outs, ref)):
        if not isinstance(r, torch.Tensor):
            same = bool(o == r)
            results.append(OutputCheck(index=i, ok=same, value=repr(o)[:80]))
            ok &= same
            continue
        entry = OutputCheck(index=i, ok=False, shape=list(r.shape),
                            dtype=str(r.dtype).removeprefix("torch."))
        problem = _mismatch(o, r)
        if problem:
            entry.error = problem
            ok = False
            results.append(entry)
            continue
        if r.dtype.is_floating_point or r.dtype.is_complex:
            atol, rtol = tolerance(r.dtype, options)
            o64, r64 = o.to(torch.complex128 if r.is_complex() else torch.float64), \
                r.to(torch.complex128 if r.is_complex() else torch.float64)
            diff = (o64 - r64).abs()
            bad = ~torch.isclose(o64, r64, atol=atol, rtol=rtol, equal_nan=True)
            finite_diff = diff[~torch.isnan(diff)]
            max_abs = finite_diff.max().item() if finite_diff.numel() else 0.0
            rel = (diff / r64.abs().clamp_min(1e-12))[~torch.isnan(diff)]
            max_rel = rel.max().item() if rel.numel() else 0.0
            good = not bool(bad.any())
            entry.max_abs_err, entry.max_rel_err = finite(max_abs), finite(max_rel)
            entry.mismatched, entry.atol, entry.rtol = int(bad.sum()), atol, rtol
        else:
            mism = int((o != r).sum())
            good = mism == 0
            entry.max_abs_err, entry.mismatched = float(mism > 0), mism
        entry.ok = good
        ok &= good
        results.append(entry)
    if len(outs) != len(ref):
        results.append(OutputCheck(index=len(results), ok=False,
                                   error=f"{len(outs)} outputs, the eager graph has {len(ref)}"))
    return {"ok": bool(ok), "outputs": results}


def _mismatch(o: Any, r: torch.Tensor) -> str:
    if not isinstance(o, torch.Tensor):
        return f"got {type(o).__name__}, not a tensor"
    if o.shape != r.shape:
        return f"shape {list(o.shape)}, eager {list(r.shape)}"
    if o.dtype != r.dtype:
        return f"dtype {o.dtype}, eager {r.dtype}".replace("torch.", "")
    if o.device.type != r.device.type:
        return f"device {o.device.type}, eager {r.device.type}"
    return ""
