"""Differential testing over PyTorch's OpInfo database: eager vs Kernelscope, per sample.

In: an OpInfo entry, a dtype, a device and a mode. Out: one `CaseResult` per sample, with
a status the coverage report aggregates:

  native    compiled by Kernelscope with the ATen fallback off, and equal to eager
  fallback  correct, but some op went to ATen (or the graph ran eagerly); `reason` says why
  mismatch  compiled result differs from eager (values, shape, dtype or device)
  error     eager ran, the compiled function raised (or timed out, or crashed the process)
  skip      eager itself rejects the sample (nothing to compare)

A case is first run with the fallback off (`CompileOptions.fallback=False`): an op with no
lowering then makes its graph run eagerly with a warning naming the op, which is how native
coverage is counted honestly. Only cases that needed the fallback are run again with it on,
to check that the fallback path is right.

float16/bfloat16 are compared as Inductor's `check_model` does: against eager at the same
precision, and where that fails against a float32 reference, passing if the compiled error
is no worse than eager's own. Random ops and ops returning uninitialized memory compare by
shape, dtype and (random ops) statistics only. The indices of topk, kthvalue, median and
mode, which eager leaves open among equal values, compare by the values they select
(tied_indices.py).
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
from tied_indices import INDICES_OUTPUT, Checker, checker
from torch.utils._pytree import tree_flatten, tree_unflatten

DTYPES: dict[str, torch.dtype] = {
    "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
    "f64": torch.float64, "i32": torch.int32, "i64": torch.int64, "bool": torch.bool,
}
TOL = {torch.float32: 1e-4, torch.float64: 1e-7, torch.float16: 1e-3, torch.bfloat16: 1.6e-2}

# Values not comparable with eager: compared by shape/dtype (and statistics when random).
RANDOM_OPS = frozenset("""bernoulli normal normal.number_mean normal.in_place uniform
rand_like randn_like randint_like randint multinomial nn.functional.dropout
nn.functional.dropout2d nn.functional.dropout3d nn.functional.alpha_dropout
nn.functional.feature_alpha_dropout nn.functional.feature_alpha_dropout.with_train
nn.functional.feature_alpha_dropout.without_train nn.functional.rrelu cauchy exponential
geometric log_normal randn rand nn.functional.fractional_max_pool2d
nn.functional.fractional_max_pool3d""".split())
UNINIT_OPS = frozenset("""empty empty_like new_empty new_empty_strided empty_strided
empty_permuted""".split())
# Outputs that are the generator's state when the op ran (philox seed and offset): eager
# and the compiled call run at different points of the stream, so only shape/dtype match.
RNG_STATE_OUTPUTS = {"torch.ops.aten._efficient_attention_forward": {2, 3},
                     "torch.ops.aten._flash_attention_forward": {2, 3}}


@dataclass
class CaseResult:
    op: str
    dtype: str
    sample: int
    status: str
    reason: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class CaseTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """SIGALRM-based limit (the worker is single-threaded Python; g++ runs as a child)."""
    def on_alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout(f"timed out after {seconds:.0f}s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def op_key(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def samples(op: Any, device: str, dtype: torch.dtype, n: int,
            requires_grad: bool = False) -> list[Any]:
    """The op's first `n` samples (seeded), with requires_grad on its differentiable inputs
    when asked; none when its generator fails."""
    out = []
    torch.manual_seed(0)
    try:
        for s in op.sample_inputs(device, dtype, requires_grad=requires_grad):
            out.append(s)
            if len(out) >= n:
                break
    except Exception:  # noqa: BLE001 - a generator that fails is an op we cannot sample
        return []
    return out


def _make_fn(op: Any, sample: Any) -> tuple[Callable[..., Any], list[torch.Tensor]]:
    """fn(*tensors) calling the op on the sample, every tensor leaf an argument."""
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    pos = [i for i, v in enumerate(leaves) if isinstance(v, torch.Tensor)]
    tensors = [leaves[i] for i in pos]
    func = _unseeded(op.op)

    def fn(*ts: torch.Tensor) -> Any:
        vals = list(leaves)
        for i, t in zip(pos, ts):
            vals[i] = t
        inp, args, kwargs = tree_unflatten(vals, spec)
        return func(inp, *args, **kwargs)

    return fn, tensors


def _call_through(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return f(*args, **kwargs)


def _unseeded(func: Callable[..., Any]) -> Callable[..., Any]:
    """OpInfo wraps random ops (and a few others) as `lambda ...: wrapper_set_seed(op, ...)`,
    whose RNG-state freezing Dynamo cannot trace: a graph break before the op, so no graph
    at all. What a user writes is the op itself, and run_case seeds eager and compiled runs
    alike, so the same lambda is called with the wrapper calling straight through."""
    code = getattr(func, "__code__", None)
    if code is None or "wrapper_set_seed" not in code.co_names:
        return func
    namespace = {**func.__globals__, "wrapper_set_seed": _call_through}  # type: ignore[attr-defined]
    return types.FunctionType(code, namespace, func.__name__,
                              func.__defaults__, func.__closure__)  # type: ignore[attr-defined]


def _clone(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.clone() if t.layout == torch.strided else t for t in ts]


def _upcast(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.to(torch.float32) if t.dtype in (torch.float16, torch.bfloat16) else t.clone()
            for t in ts]


class Mismatch(Exception):
    pass


def _leaves(x: Any) -> list[Any]:
    return tree_flatten(x)[0]


def compare(actual: Any, expected: Any, ref32: Any | None, kind: str,
            rng_state: frozenset[int] | set[int] = frozenset(),
            indices: Checker | None = None) -> None:
    """Raise Mismatch with a short reason when `actual` is not eager's `expected`.
    `indices`: how an indices output whose choice among ties eager leaves open is
    compared (tied_indices.py)."""
    a, e = _leaves(actual), _leaves(expected)
    r = _leaves(ref32) if ref32 is not None else [None] * len(e)
    if len(a) != len(e):
        raise Mismatch(f"{len(a)} outputs, eager has {len(e)}")
    for k, (x, y, z) in enumerate(zip(a, e, r)):
        if not isinstance(y, torch.Tensor):
            if isinstance(x, torch.Tensor) or not _scalar_equal(x, y):
                raise Mismatch(f"output {k}: {x!r} != {y!r}")
            continue
        if not isinstance(x, torch.Tensor):
            raise Mismatch(f"output {k} is {type(x).__name__}, eager gives a tensor")
        if x.shape != y.shape or x.dtype != y.dtype or x.device.type != y.device.type:
            raise Mismatch(f"output {k}: {tuple(x.shape)} {x.dtype} {x.device} vs eager "
                           f"{tuple(y.shape)} {y.dtype} {y.device}")
        if kind == "uninit" or x.layout != torch.strided or k in rng_state:
            continue
        if kind == "random":
            _compare_stats(k, x, y)
            continue
        if indices is not None and k == INDICES_OUTPUT and not x.dtype.is_floating_point:
            why = indices(x, y)
            if why:
                raise Mismatch(f"output {k}: {why}")
            continue
        _compare_values(k, x, y, z)


def _scalar_equal(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
        return True
    return bool(x == y)


def _compare_stats(k: int, x: torch.Tensor, y: torch.Tensor) -> None:
    if not x.dtype.is_floating_point or x.numel() < 64:
        return
    xf, yf = x.double(), y.double()
    if torch.isfinite(yf).all() and not torch.isfinite(xf).all():
        raise Mismatch(f"output {k}: non-finite random values")
    sd = float(yf.std()) if yf.numel() > 1 else 1.0
    tol = 6 * sd / math.sqrt(x.numel()) + 1e-6
    if abs(float(xf.mean()) - float(yf.mean())) > tol + 0.05 * abs(float(yf.mean())):
        raise Mismatch(f"output {k}: mean {float(xf.mean()):.4g} vs eager "
                       f"{float(yf.mean()):.4g}")


def _compare_values(k: int, x: torch.Tensor, y: torch.Tensor, z: Any) -> None:
    if x.is_complex():  # real and imaginary parts at the float tolerance (FFTs round
        # differently on other layouts); complex32 has no kernels: widen it first
        tol = TOL[{torch.complex32: torch.float16, torch.complex64: torch.float32}.get(
            x.dtype, torch.float64)]
        xr, yr = (torch.view_as_real(t.to(torch.complex128).resolve_conj()).cpu()
                  for t in (x, y))
        if not torch.allclose(xr, yr, rtol=tol, atol=tol, equal_nan=True):
            bad = ~torch.isclose(xr, yr, rtol=tol, atol=tol, equal_nan=True).all(-1)
            raise Mismatch(f"output {k}: {int(bad.sum())} of {x.numel()} elements differ, "
                           f"max abs {float((xr - yr).abs().nan_to_num(float('inf')).max()):.3g}")
        return
    if not x.dtype.is_floating_point:
        if not torch.equal(x.cpu(), y.cpu()):
            diff = (x.cpu() != y.cpu()).sum().item()
            raise Mismatch(f"output {k}: {diff} of {x.numel()} elements differ")
        return
    tol = TOL.get(x.dtype, 1e-4)
    xc, yc = x.cpu(), y.cpu()
    if torch.allclose(xc, yc, rtol=tol, atol=tol, equal_nan=True):
        return
    if isinstance(z, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16,
                                                   torch.float32):
        zc = z.cpu().double()
        if (xc.isnan() == zc.isnan()).all() or (xc.isnan() == yc.isnan()).all():
            fin = torch.isfinite(zc)
            err_a = (xc.double() - zc)[fin].abs().max().item() if fin.any() else 0.0
            err_e = (yc.double() - zc)[fin].abs().max().item() if fin.any() else 0.0
            same_inf = bool(((xc == yc) | fin | yc.isnan()).all())
            if same_inf and err_a <= 1.5 * err_e + tol * 1e-2:
                return
    bad = ~torch.isclose(xc, yc, rtol=tol, atol=tol, equal_nan=True)
    diff = (xc.double() - yc.double()).abs()
    diff[~bad] = 0
    raise Mismatch(f"output {k}: {int(bad.sum())} of {x.numel()} differ, max abs "
                   f"{float(diff.nan_to_num(float('inf')).max()):.3g}")


@dataclass
class Outcome:
    graphs: int
    eager_graphs: list[str]


def run_compiled(fn: Callable[..., Any], args: list[Any], options: dict[str, Any]
                 ) -> tuple[Any, Outcome]:
    """torch.compile(fn, backend=kernelscope) on args; counts graphs and eager fallbacks."""
    from kernelscope.compiler import backend

    outcome = Outcome(0, [])

    def counting(gm: Any, example_inputs: Any) -> Any:
        outcome.graphs += 1
        return backend(gm, example_inputs, options=options)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=counting, dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = compiled(*args)
    outcome.eager_graphs = [str(w.message) for w in caught
                            if "kernelscope: running graph" in str(w.message)]
    return result, outcome


def run_case(op: Any, dtype_name: str, index: int, sample: Any, options: dict[str, Any],
             timeout: float) -> CaseResult:
    """One sample, first with the fallback off, then (if needed) with it on."""
    key = op_key(op)
    start = time.perf_counter()
    kind = "random" if key in RANDOM_OPS or op.name in RANDOM_OPS else (
        "uninit" if op.name in UNINIT_OPS else "values")

    def result(status: str, reason: str = "") -> CaseResult:
        return CaseResult(key, dtype_name, index, status, reason[:300],
                          round(time.perf_counter() - start, 3))

    fn, tensors = _make_fn(op, sample)
    try:
        torch.manual_seed(1234)
        expected = fn(*_clone(tensors))
    except Exception as e:  # noqa: BLE001 - eager rejects the sample
        return result("skip", f"eager raises {type(e).__name__}")
    ref32 = None
    if DTYPES[dtype_name] in (torch.float16, torch.bfloat16):
        try:
            ref32 = fn(*_upcast(tensors))
        except Exception:  # noqa: BLE001 - no fp32 variant: compare with eager only
            ref32 = None
    status, reason = "native", ""
    for fallback in (False, True):
        opts = {**options, "fallback": fallback}
        try:
            with time_limit(timeout):
                torch.manual_seed(1234)
                actual, outcome = run_compiled(fn, _clone(tensors), opts)
        except Exception as e:  # noqa: BLE001 - any failure of ours is the result
            return result("error", f"{type(e).__name__}: {_first_line(e)}")
        try:
            compare(actual, expected, ref32, kind, RNG_STATE_OUTPUTS.get(key, set()),
                    checker(op.name, sample))
        except Mismatch as e:
            return result("mismatch", str(e))
        except Exception as e:  # noqa: BLE001 - comparing itself failed
            return result("error", f"compare: {type(e).__name__}: {_first_line(e)}")
        if outcome.graphs == 0:
            return result("fallback", "no graph captured (Dynamo ran it eagerly)")
        if not outcome.eager_graphs:
            return result(status, reason)
        status = "fallback"
        reason = outcome.eager_graphs[0].split(":", 1)[-1].strip()
        if fallback:  # even with the fallback on, some graph ran eagerly
            return result("fallback", reason)
    return result(status, reason)


def _first_line(e: BaseException) -> str:
    inner = getattr(e, "inner_exception", None)  # Dynamo's BackendCompilerFailed wraps ours
    if isinstance(inner, BaseException):
        return f"{type(inner).__name__}: {_first_line(inner)}"
    text = str(e).strip().splitlines()
    return text[0][:200] if text else ""


STATUS_ORDER = ("error", "mismatch", "fallback", "native", "skip")


def aggregate(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per op: the worst status over its cases (error > mismatch > fallback > native)."""
    ops: dict[str, dict[str, Any]] = {}
    for c in cases:
        entry = ops.setdefault(c["op"], {"status": "skip", "reason": "", "dtypes": {}})
        d = entry["dtypes"]
        prev = d.get(c["dtype"], "skip")
        if STATUS_ORDER.index(c["status"]) < STATUS_ORDER.index(prev):
            d[c["dtype"]] = c["status"]
        else:
            d.setdefault(c["dtype"], prev)
        worse = STATUS_ORDER.index(c["status"]) < STATUS_ORDER.index(entry["status"])
        if worse or (c["status"] == entry["status"] and not entry["reason"]):
            entry["status"], entry["reason"] = c["status"], c["reason"]
    return ops
