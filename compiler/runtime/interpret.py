"""The reference interpreter: what the IR means, evaluated with torch on whole tensors.

Every buffer's inner_fn runs once under `TorchHandler`, with its loop variables bound to
broadcastable aranges, so an index expression evaluates to a tensor of offsets and
`ops.load` gathers from the buffer's storage. Lowering is checked against eager PyTorch
through this interpreter, independently of any code generator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from kernelscope.compiler.ir.handlers import body_vars
from kernelscope.compiler.ir.indexing import FloorDiv, ModularIndexing
from kernelscope.compiler.ir.nodes import (
    ComputedBuffer,
    ExternKernel,
    ExternOutput,
    Layout,
    Reduction,
    Stored,
    TensorArg,
)
from kernelscope.compiler.ir.ops import Handler, use_handler
from kernelscope.compiler.lowering.graph import LoweredGraph

TORCH_OPS: dict[str, Callable[..., torch.Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.true_divide,
    "floordiv": torch.floor_divide, "mod": torch.remainder, "fmod": torch.fmod,
    "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "atan2": torch.atan2, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
    "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and,
    "logical_or": torch.logical_or, "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor, "relu": torch.relu, "reciprocal": torch.reciprocal,
}


class TorchHandler(Handler):
    """Ops on whole tensors: the semantics every code generator must match."""

    def __init__(self, storages: dict[str, torch.Tensor], bindings: dict[sympy.Symbol, Any],
                 device: str) -> None:
        self.storages, self.bindings, self.device = storages, bindings, device
        self.indirect: dict[sympy.Symbol, torch.Tensor] = {}

    def _index(self, expr: Any) -> torch.Tensor:
        env = {**self.bindings, **self.indirect}
        return _evaluate(sympy.sympify(expr), env, self.device)

    def load(self, name: str, index: Any) -> torch.Tensor:
        storage, idx = self.storages[name], self._index(index).long()
        if not isinstance(storage, _Clamped) and idx.numel() and (
                int(idx.min()) < 0 or int(idx.max()) >= storage.numel()):
            # An unmasked load must stay inside its buffer (a GPU faults, C++ reads junk).
            raise IndexError(f"load of {name} at {index} reaches [{int(idx.min())}, "
                             f"{int(idx.max())}] outside its {storage.numel()} elements")
        return storage[idx]

    def constant(self, value: Any, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor(value, dtype=dtype, device=self.device)

    def index_expr(self, expr: Any, dtype: torch.dtype) -> torch.Tensor:
        return self._index(expr).to(dtype)

    def to_dtype(self, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return x.to(dtype)

    def where(self, cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.where(cond.bool(), a, b)

    def masked(self, mask: torch.Tensor, body: Callable[[], Any], other: float) -> Any:
        # Evaluate everywhere with out-of-range indices clamped, then select.
        saved = self.storages
        self.storages = {k: v if isinstance(v, _Clamped) else _Clamped(v)  # type: ignore[misc]
                         for k, v in saved.items()}
        try:
            value = body()
        finally:
            self.storages = saved
        return torch.where(mask.bool(), value, torch.tensor(other, dtype=value.dtype,
                                                            device=value.device))

    def indirect_indexing(self, x: torch.Tensor, size: int) -> sympy.Symbol:
        s = sympy.Symbol(f"indirect{len(self.indirect)}", integer=True)
        self.indirect[s] = x.long().clamp(0, size - 1)
        return s

    def _unary(self, name: str, x: torch.Tensor) -> torch.Tensor:
        if name == "sigmoid":
            return torch.sigmoid(x)
        if name == "rsqrt":
            return torch.rsqrt(x)
        if name == "round":
            return torch.round(x)
        if name.startswith("frexp_"):
            return torch.frexp(x)[name == "frexp_exponent"]
        return _torch_fn(name)(x)

    def _binary(self, name: str, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if name == "polygamma":
            return torch.polygamma(int(a), b)
        return TORCH_OPS[name](a, b) if name in TORCH_OPS else _torch_fn(name)(a, b)


def _torch_fn(name: str) -> Callable[..., torch.Tensor]:
    """The torch function of an op of the protocol (math functions live in torch.special)."""
    fn = getattr(torch, name, None)
    return fn if fn is not None else getattr(torch.special, name)


class _Clamped:
    """A storage whose out-of-range gathers read element 0 (masked lanes are discarded)."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    def __getitem__(self, idx: torch.Tensor) -> torch.Tensor:
        ok = (idx >= 0) & (idx < self.t.numel())
        return self.t[torch.where(ok, idx, torch.zeros_like(idx))]


def _evaluate(expr: sympy.Expr, env: dict[Any, Any], device: str) -> torch.Tensor:
    if expr.is_Integer:
        return torch.tensor(int(expr), device=device)
    if expr.is_Symbol:
        return env[expr]
    if isinstance(expr, FloorDiv):
        a, b = (_evaluate(x, env, device) for x in expr.args)
        return torch.div(a, b, rounding_mode="floor")
    if isinstance(expr, ModularIndexing):
        a, d, m = (_evaluate(x, env, device) for x in expr.args)
        return torch.remainder(torch.div(a, d, rounding_mode="floor"), m)
    args = [_evaluate(x, env, device) for x in expr.args]
    if isinstance(expr, sympy.Add):
        return sum(args[1:], args[0])
    if isinstance(expr, sympy.Mul):
        return math.prod(args[1:], start=args[0])
    raise NotImplementedError(f"cannot evaluate index {expr}")


def _grid(sizes: Sequence[int], device: str) -> list[torch.Tensor]:
    n = len(sizes)
    return [torch.arange(s, device=device).reshape([s if i == k else 1 for i in range(n)])
            for k, s in enumerate(sizes)]


REDUCE: dict[str, Callable[..., torch.Tensor]] = {
    "sum": torch.sum, "prod": torch.prod, "any": torch.any, "all": torch.all,
    "logsumexp": torch.logsumexp,
}


def _reduce(value: torch.Tensor, rtype: str, ndims: int) -> torch.Tensor:
    dims = list(range(value.dim() - ndims, value.dim()))
    flat = value.flatten(start_dim=value.dim() - ndims) if ndims else value.unsqueeze(-1)
    if rtype in ("max", "min"):
        return flat.amax(-1) if rtype == "max" else flat.amin(-1)
    if rtype in ("argmax", "argmin"):
        return flat.argmax(-1) if rtype == "argmax" else flat.argmin(-1)
    return REDUCE[rtype](value, dim=dims) if dims else value


def interpret(graph: LoweredGraph, inputs: Sequence[torch.Tensor]) -> list[Any]:
    """Run a lowered graph on real inputs; returns the graph outputs."""
    storages: dict[str, torch.Tensor] = {}
    tensors: dict[str, torch.Tensor] = {}
    for inp, t in zip(graph.inputs, [*inputs, *graph.constants]):
        tensors[inp.name] = t
        storages[inp.name] = _storage_of(t)
    for buf in graph.buffers:
        if isinstance(buf, ComputedBuffer) and buf.data is not None:
            value = _run_body(buf, storages, graph.device)
            out = torch.empty_strided(buf.layout.size, buf.layout.stride, dtype=buf.dtype,
                                      device=graph.device)
            out.copy_(value.reshape(buf.layout.size).to(buf.dtype))
            tensors[buf.name], storages[buf.name] = out, _storage_of(out)
        elif isinstance(buf, ExternKernel):
            result = buf.op(*_args(buf.args, tensors), **_args(buf.kwargs, tensors))
            tensors[buf.name] = result
            if isinstance(result, torch.Tensor):
                storages[buf.name] = _storage_of(result)
        elif isinstance(buf, ExternOutput):
            tensors[buf.name] = tensors[buf.parent][buf.item]
            storages[buf.name] = _storage_of(tensors[buf.name])
    outs = []
    for o in graph.outputs:
        if isinstance(o, Stored):
            a = o.as_arg()
            base = tensors[a.name]
            outs.append(base.as_strided(a.size, a.stride, base.storage_offset() + a.offset))
        else:
            outs.append(o)
    return outs


def _storage_of(t: torch.Tensor) -> torch.Tensor:
    """A flat view from t's first element over everything its layout can reach."""
    lay = Layout(t.device.type, t.dtype, tuple(t.shape), tuple(t.stride()))
    n = max(lay.storage_numel(), 1) if t.numel() else 0
    return t.as_strided((n,), (1,), t.storage_offset())


def _run_body(buf: ComputedBuffer, storages: dict[str, torch.Tensor], device: str
              ) -> torch.Tensor:
    data = buf.data
    assert data is not None
    xs, rs = body_vars(data)
    sizes = [*data.ranges, *(data.reduction_ranges if isinstance(data, Reduction) else ())]
    with use_handler(TorchHandler(storages, dict(zip(xs + rs, _grid(sizes, device))), device)):
        value = data.inner_fn(xs, rs) if isinstance(data, Reduction) else data.inner_fn(xs)
    if not isinstance(data, Reduction):
        return torch.as_tensor(value, device=device).expand(sizes)
    value = torch.as_tensor(value, device=device).to(data.src_dtype)
    value = value.expand(sizes) if value.dim() or sizes else value
    return _reduce(value, data.reduction_type, len(data.reduction_ranges))


def _args(v: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(v, TensorArg):
        base = tensors[v.name]
        if v.is_plain():
            return base
        return base.as_strided(v.size, v.stride, base.storage_offset() + v.offset)
    if isinstance(v, dict):
        return {k: _args(x, tensors) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_args(x, tensors) for x in v)
    return v

