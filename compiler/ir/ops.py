"""The ops-handler protocol: how a define-by-run `inner_fn` is read.

An IR loop body is a plain Python function `inner_fn(index)` that calls `ops.load`,
`ops.add`, `ops.exp`, ... The calls go to whichever handler is installed by
`use_handler(h)`: the same function is printed, turned into a JSON tree, scanned for the
buffers it reads, interpreted with torch, or emitted as Triton or C++, just by installing
a different handler. This contextvar is the only implicit state in the compiler.

Every handler also keeps `origin`, the FX node whose lowering built the op being called;
lowerings wrap their inner_fns with `with_origin`, so generated code knows which source
line each line came from.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch

# The ops an inner_fn may call, by arity. Every handler implements all of them (the base
# class routes the unary and binary ones to `_unary`/`_binary` so simple handlers stay
# short; `where` and the primitives each have their own method).
UNARY_OPS = (
    "neg abs exp exp2 expm1 log log1p log2 sqrt rsqrt sin cos tan tanh sigmoid erf "
    "floor ceil trunc round reciprocal sign logical_not isnan isinf relu asin acos atan "
    "sinh cosh bitwise_not"
).split()
BINARY_OPS = (
    "add sub mul truediv floordiv mod fmod pow maximum minimum eq ne lt le gt ge "
    "logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor atan2"
).split()
# Math functions (compiler/lowering/mathfns.py); a backend without a rule for one at the
# compute dtype leaves the node to ATen (`Backend.refuses`), named in the event.
MATH_UNARY = (
    "log10 erfc erfinv lgamma digamma i0 i0e i1 i1e erfcx ndtri log_ndtr signbit asinh "
    "acosh atanh bessel_j0 bessel_j1 bessel_y0 bessel_y1 modified_bessel_i0 "
    "modified_bessel_i1 modified_bessel_k0 modified_bessel_k1 scaled_modified_bessel_k0 "
    "scaled_modified_bessel_k1 spherical_bessel_j0 airy_ai frexp_mantissa frexp_exponent"
).split()
POLYNOMIALS = tuple(f"{p}_polynomial_{k}" for p, k in (
    ("chebyshev", "t"), ("chebyshev", "u"), ("chebyshev", "v"), ("chebyshev", "w"),
    ("shifted_chebyshev", "t"), ("shifted_chebyshev", "u"), ("shifted_chebyshev", "v"),
    ("shifted_chebyshev", "w"), ("hermite", "h"), ("hermite", "he"), ("laguerre", "l"),
    ("legendre", "p")))
# polygamma(n, x): n is an integer constant operand
MATH_BINARY = ("hypot fmin fmax copysign nextafter igamma igammac zeta polygamma".split()
               + list(POLYNOMIALS))
UNARY_OPS += MATH_UNARY
BINARY_OPS += MATH_BINARY
COMPARISONS = frozenset("eq ne lt le gt ge logical_and logical_or logical_xor".split())
PRIMITIVES = ("load", "constant", "index_expr", "to_dtype", "where", "masked",
              "indirect_indexing")
OP_NAMES = frozenset(PRIMITIVES + tuple(UNARY_OPS) + tuple(BINARY_OPS))

_current: contextvars.ContextVar[Handler] = contextvars.ContextVar("kernelscope_ops")


class Handler:
    """Base class: subclasses implement the primitives; `origin` tracks provenance."""

    origin: str | None = None

    # -- primitives every handler defines -------------------------------------------
    def load(self, name: str, index: Any) -> Any:
        raise NotImplementedError

    def constant(self, value: Any, dtype: torch.dtype) -> Any:
        raise NotImplementedError

    def index_expr(self, expr: Any, dtype: torch.dtype) -> Any:
        raise NotImplementedError

    def to_dtype(self, x: Any, dtype: torch.dtype) -> Any:
        raise NotImplementedError

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def masked(self, mask: Any, body: Callable[[], Any], other: float) -> Any:
        """body() evaluated only where mask holds; `other` elsewhere (cat, padding)."""
        raise NotImplementedError

    def indirect_indexing(self, x: Any, size: int) -> Any:
        """Turn a loaded integer value into a sympy symbol usable inside an index."""
        raise NotImplementedError

    def _unary(self, name: str, x: Any) -> Any:
        raise NotImplementedError

    def _binary(self, name: str, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def call_traced(self, body: Callable[..., Any], fn: Callable[..., Any],
                    args: tuple[Any, ...]) -> Any:
        """Run a lowering's loop body (`fn`, wrapped by `with_origin` as `body`) on
        `args`; a handler whose reading of a body depends only on the body and its
        arguments may answer from a memo instead (OpUseHandler does)."""
        return fn(*args)


def _make_unary(name: str) -> Callable[[Handler, Any], Any]:
    def op(self: Handler, x: Any) -> Any:
        return self._unary(name, x)

    op.__name__ = name
    return op


def _make_binary(name: str) -> Callable[[Handler, Any, Any], Any]:
    def op(self: Handler, a: Any, b: Any) -> Any:
        return self._binary(name, a, b)

    op.__name__ = name
    return op


for _n in UNARY_OPS:
    setattr(Handler, _n, _make_unary(_n))
for _n in BINARY_OPS:
    setattr(Handler, _n, _make_binary(_n))


def _dispatcher(name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        handler = _current.get(None)
        if handler is None:
            raise RuntimeError(f"ops.{name} called outside `use_handler`")
        return getattr(handler, name)(*args, **kwargs)

    call.__name__ = name
    return call


class _OpsProxy:
    """`ops.add(a, b)` calls `add` on the handler installed by `use_handler`; a name
    that is not an op of the protocol is an error where it is written, not a silently
    missing method of some handler later. (Each op's dispatcher is made once, below:
    loop bodies call ops thousands of times per graph.)"""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        raise AttributeError(f"ops.{name} is not an op (see compiler/ir/ops.py)")


for _n in OP_NAMES:
    setattr(_OpsProxy, _n, staticmethod(_dispatcher(_n)))

ops = _OpsProxy()


@contextlib.contextmanager
def use_handler(handler: Handler) -> Iterator[Handler]:
    token = _current.set(handler)
    try:
        yield handler
    finally:
        _current.reset(token)


def combine_op(reduction_type: str) -> str:
    """The op-table name of a reduction's step, folding a value into the accumulator
    (operands: accumulator, value; for argmax/argmin, whether the value replaces the best
    so far): a backend without the rule at a dtype cannot run that reduction there."""
    return f"combine_{reduction_type}"


def with_origin(fn: Callable[..., Any], origin: str) -> Callable[..., Any]:
    """Wrap an inner_fn so every op it issues is attributed to FX node `origin`."""

    def traced(*args: Any) -> Any:
        handler = _current.get()
        saved = handler.origin
        handler.origin = origin
        try:
            return handler.call_traced(traced, fn, args)
        finally:
            handler.origin = saved

    traced.__wrapped__ = fn  # type: ignore[attr-defined]
    return traced


@functools.cache
def promote_types(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """torch.promote_types, memoized: under a FakeTensorMode every call dispatches
    (about a millisecond each), and codegen asks for every op of every kernel."""
    return torch.promote_types(a, b)


def result_dtype(name: str, *dtypes: torch.dtype) -> torch.dtype:
    """dtype of an op's result, given its operands' dtypes."""
    if name in COMPARISONS or name in ("isnan", "isinf", "logical_not", "signbit"):
        return torch.bool
    if name == "frexp_exponent":
        return torch.int32
    if name == "polygamma":  # (n, x): the dtype of x
        return dtypes[1]
    out = dtypes[0]
    for d in dtypes[1:]:
        out = promote_types(out, d)
    return out


def reduction_identity(rtype: str, dtype: torch.dtype) -> Any:
    """The value a reduction starts from (what an empty row reduces to)."""
    if rtype in ("sum", "any"):
        return False if dtype == torch.bool else 0
    if rtype in ("prod", "all"):
        return True if dtype == torch.bool else 1
    if dtype == torch.bool and rtype in ("max", "argmax", "min", "argmin"):
        return rtype in ("min", "argmin")  # False is the least bool, True the greatest
    if rtype in ("max", "argmax", "logsumexp"):
        return float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min
    if rtype in ("min", "argmin"):
        return float("inf") if dtype.is_floating_point else torch.iinfo(dtype).max
    raise ValueError(rtype)
