"""One benchmark item measured in this process: a suite case, a model, or an overhead probe.

What comes in: an item name ("case:softmax", "model:bert_base", "overhead:call_us") and
the run's settings. What goes out: one JSON-able dict with, per column (eager, inductor,
kernelscope, and variants), the median ms, kernels per call, cold (and for models warm)
compile seconds, and the check against eager. Timings happen under `timing_lock()`, so
several items can compile in parallel while only one at a time holds the GPU's clock.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from benchmarks import cases as case_table
from benchmarks import models as model_table
from benchmarks.inference import measure_inference
from benchmarks.stages import measure_stages
from benchmarks.timing import count_kernels, median_ms, sync
from benchmarks.training import measure_training

LOCK_ENV = "KSBENCH_LOCK"


@contextlib.contextmanager
def _flock(path: str, mode: int) -> Iterator[None]:
    with open(path, "a") as f:
        fcntl.flock(f, mode)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def timing_lock() -> Iterator[None]:
    """Hold the run's one timing lock (a file named by $KSBENCH_LOCK), if there is one, and
    wait until no item of the run is compiling: launch-bound models time the host too, and
    a compile beside them (Inductor's pool of Triton workers) moved eager's BERT-base from
    4.6 to 7.8 ms between runs. Compiles wait for the timing in turn (`compiling`)."""
    path = os.environ.get(LOCK_ENV)
    if not path:
        yield
        return
    with _flock(path, fcntl.LOCK_EX), _flock(path + ".compile", fcntl.LOCK_EX):
        yield


@contextlib.contextmanager
def compiling() -> Iterator[None]:
    """Mark a compile (or other work outside a timing: making inputs, eager's reference,
    checks) in progress: any number at once, never during a timing. The final run of
    2026-12-01 16:12 still timed beside other items' references and checks, which run on
    the GPU too (its basic_block: 0.349 ms against 0.251 in a quieter run)."""
    path = os.environ.get(LOCK_ENV)
    if not path:
        yield
        return
    with _flock(path + ".compile", fcntl.LOCK_SH):
        yield


def _tensors(value: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def compare(out: Any, ref: Any, tol: float, ref64: Any = None,
            eager_err64: float | None = None) -> dict[str, Any]:
    """allclose(out, ref, rtol=atol=tol) over every output, and the worst relative norm
    error ||out - ref|| / ||ref|| (against a more precise reference too, where there is
    one). With `eager_err64` (eager's own error against that reference: a bf16 model
    against its float32 copy), an output that misses allclose but is at most twice as far
    from the precise reference as eager is judged ok, and `why` says so: elementwise
    rounding through many bf16 layers differs between any two correct compilations."""
    outs, refs = _tensors(out), _tensors(ref)
    if len(outs) != len(refs):
        return {"ok": False, "why": f"{len(outs)} outputs, eager has {len(refs)}"}
    res: dict[str, Any] = {"ok": True, "rel_err": 0.0}
    for o, r in zip(outs, refs):
        if o.shape != r.shape or o.dtype != r.dtype or o.device != r.device:
            return {"ok": False, "why": f"{o.dtype}{list(o.shape)}@{o.device} vs eager "
                    f"{r.dtype}{list(r.shape)}@{r.device}"}
        od, rd = o.double(), r.double()
        if not torch.allclose(od, rd, rtol=tol, atol=tol, equal_nan=True):
            res["ok"] = False
            res["why"] = f"max abs err {(od - rd).abs().max().item():.3g} (tol {tol:g})"
        norm = rd.norm().item() or 1.0
        err = (od - rd).norm().item() / norm
        res["rel_err"] = max(res["rel_err"], err if err == err else float("inf"))  # NaN: inf
    if ref64 is not None:
        errs = [(o.double() - r).norm().item() / (r.norm().item() or 1.0)
                for o, r in zip(outs, _tensors(ref64))]
        res["rel_err_fp64"] = max(errs) if errs else 0.0
        if not res["ok"] and eager_err64 is not None and "max abs err" in res.get("why", "") \
                and res["rel_err_fp64"] <= 2 * eager_err64:
            res["ok"] = True
            res["why"] = (f"{res['why']} elementwise, but as close to float32 as eager "
                          f"({res['rel_err_fp64']:.1e} against eager's {eager_err64:.1e})")
    return res


def _reference64(fn: Any, inputs: tuple[Any, ...]) -> Any:
    """The function on float64 copies of its inputs (plain fp32 functions only)."""
    if isinstance(fn, torch.nn.Module):
        return None
    ts = _tensors(inputs)
    if not ts or any(t.dtype not in (torch.float32, torch.int64) for t in ts):
        return None
    return fn(*pytree.tree_map(lambda t: t.double() if isinstance(t, torch.Tensor)
                               and t.dtype == torch.float32 else t, inputs))


def _error(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first}"[:300]


def kernelscope(options: dict[str, Any] | None = None) -> Any:
    """Kernelscope's backend with `options`: a new object each call, so columns compiled
    in one process without a Dynamo reset between them keep their frames apart (Dynamo
    matches a cached frame to the backend object that compiled it)."""
    from kernelscope.compiler import backend

    def kernelscope_backend(gm: Any, inputs: Any) -> Any:
        return backend(gm, inputs, options=options) if options else backend(gm, inputs)
    return kernelscope_backend


def compile_and_time(label: str, fn: Any, inputs: tuple[Any, ...], ref: Any, tol: float,
                     settings: dict[str, Any], compile_kw: dict[str, Any],
                     fresh: Callable[[], tuple[Any, ...]] | None = None,
                     warm: bool = False, precise: tuple[Any, float] | None = None
                     ) -> dict[str, Any]:
    """One compiled column: cold compile (first call), check, median ms, kernels."""
    device = settings["device"]
    res: dict[str, Any] = {}
    try:
        torch._dynamo.reset()
        compiled = torch.compile(fn, **compile_kw)
        args = fresh() if fresh else inputs
        with compiling():
            t0 = time.perf_counter()
            out = compiled(*args)
            sync(device)
            res["compile_s"] = round(time.perf_counter() - t0, 2)
            res["check"] = compare(args if fresh else out, ref, tol,
                                   *(precise if precise else ()))
        if warm:  # again, from scratch, with every on-disk cache now warm
            torch._dynamo.reset()
            compiled = torch.compile(fn, **compile_kw)
            with compiling():
                t0 = time.perf_counter()
                compiled(*inputs)
                sync(device)
                res["warm_compile_s"] = round(time.perf_counter() - t0, 2)
        with timing_lock():
            res["ms"] = median_ms(lambda: compiled(*inputs), device, settings["warmup"],
                                  settings["rep"])
            res["kernels"] = count_kernels(lambda: compiled(*inputs), device)
    except Exception as e:  # noqa: BLE001 - a failing backend is a cell, not a crash
        res["error"] = _error(e)
        print(f"[{label}] {traceback.format_exc()}", file=sys.stderr)
    return res


def columns(settings: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    cols: list[tuple[str, dict[str, Any]]] = []
    if settings.get("inductor", True):
        cols.append(("inductor", {"backend": "inductor"}))
        if settings.get("max_autotune"):
            cols.append(("inductor_max", {"backend": "inductor",
                                          "mode": "max-autotune-no-cudagraphs"}))
        if settings.get("reduce_overhead"):  # against Kernelscope's cuda_graphs
            cols.append(("inductor_ro", {"backend": "inductor", "mode": "reduce-overhead"}))
    cols.append(("kernelscope", {"backend": kernelscope(settings.get("ks_options"))}))
    if settings.get("ks_options_b") is not None:  # --ks-options-b: an A/B in one process
        cols.append(("kernelscope_b", {"backend": kernelscope(settings["ks_options_b"])}))
    if settings.get("reduce_overhead"):
        graphed = {**(settings.get("ks_options") or {}), "cuda_graphs": True}
        cols.append(("kernelscope_cg", {"backend": kernelscope(graphed)}))
    return cols


def measure_case(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    case = case_table.by_name([name])[0]
    device, size = settings["device"], settings["size"]
    torch.manual_seed(0)
    with compiling():  # GPU work outside a timing: never beside another item's timing
        fn, inputs = case.make(device, size)
    row: dict[str, Any] = {"item": f"case:{name}", "case": name, "what": case.what,
                           "shapes": " ".join("x".join(map(str, t.shape))
                                              for t in _tensors(inputs)[:3]),
                           "memory_bound": case.memory_bound}
    with torch.no_grad():
        # In-place cases: every side starts from its own copy of the untouched inputs
        # (timing loops mutate `inputs` itself).
        pristine = copy.deepcopy(inputs) if case.mutates else None
        fresh = (lambda: copy.deepcopy(pristine)) if case.mutates else None
        with compiling():
            if fresh:
                ref_args = fresh()
                fn(*ref_args)
                ref = ref_args
            else:
                ref = fn(*inputs)
            ref64 = None if case.mutates else _reference64(fn, inputs)
            if ref64 is not None:
                row["eager_rel_err_fp64"] = compare(ref, ref, 1.0, ref64).get("rel_err_fp64")
        row["bytes"] = sum(t.nbytes for t in _tensors(inputs)) + (
            sum(t.nbytes for t in _tensors(inputs) if case.mutates) * 3 // 4 if case.mutates
            else sum(t.nbytes for t in _tensors(ref)))
        if isinstance(fn, torch.nn.Module):
            row["bytes"] += sum(p.nbytes for p in fn.parameters())
        with timing_lock():
            row["eager"] = {"ms": median_ms(lambda: fn(*inputs), device, settings["warmup"],
                                            settings["rep"]),
                            "kernels": count_kernels(lambda: fn(*inputs), device)}
        for label, kw in columns(settings):
            row[label] = compile_and_time(label, fn, inputs, ref, case.tol, settings, kw, fresh)
            if label == "kernelscope" and ref64 is not None and "error" not in row[label]:
                with compiling():
                    out = torch.compile(fn, **kw)(*inputs)
                    row[label]["check"]["rel_err_fp64"] = compare(out, ref, 1.0, ref64).get(
                        "rel_err_fp64")
    return row


def measure_model(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    model = model_table.by_name([name])[0]
    row: dict[str, Any] = {"item": f"model:{name}", "case": name, "what": model.what}
    why = model_table.available(model)
    if why:
        row["skipped"] = why
        return row
    device = settings["device"]
    torch.manual_seed(0)
    with compiling():
        module, x = model.make(device)
    row["shapes"] = "x".join(map(str, x.shape))
    with torch.no_grad():
        with compiling():
            ref = module(x)
            precise = _float32_reference(module, x, ref)
            if precise is not None:
                row["eager_rel_err_fp32"] = precise[1]
        with timing_lock():
            row["eager"] = {"ms": median_ms(lambda: module(x), device, settings["warmup"],
                                            settings["rep"]),
                            "kernels": count_kernels(lambda: module(x), device)}
        for label, kw in columns(settings):
            row[label] = compile_and_time(label, module, (x,), ref, model.tol, settings, kw,
                                          warm=True, precise=precise)
    return row


def _float32_reference(module: torch.nn.Module, x: torch.Tensor, ref: Any
                       ) -> tuple[Any, float] | None:
    """A bf16 model's output computed by a float32 copy of it, and eager's own relative
    error against that (None for a model that is not bf16)."""
    if not any(p.dtype == torch.bfloat16 for p in module.parameters()):
        return None
    hi = copy.deepcopy(module).float()
    out32 = pytree.tree_map(lambda t: t.double()
                            if isinstance(t, torch.Tensor) and t.is_floating_point() else t,
                            hi(x.float() if x.is_floating_point() else x))
    del hi
    err = compare(ref, ref, 1.0, out32).get("rel_err_fp64", 0.0)
    return out32, err


def _per_call_us(fn: Callable[[], Any], device: str, calls: int = 2000) -> float:
    """Microseconds per call of a synchronised Python loop (best of three loops)."""
    for _ in range(50):
        fn()
    sync(device)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
            sync(device)
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def _add_relu(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x + y).relu()


def _chain10(x: torch.Tensor) -> torch.Tensor:
    for i in range(5):
        x = torch.sin(x) * (1.0 + 0.1 * i)
    return x


def measure_overhead(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    """call_us: one-kernel graph (1024-element add+ReLU), us per synchronised call.
    graphs_chain10 / graphs_gpt2_block: CUDA graphs, ours against mode="reduce-overhead"."""
    device = settings["device"]
    row: dict[str, Any] = {"item": f"overhead:{name}", "case": name}
    cuda = device.startswith("cuda")
    if name == "call_us":
        fn: Any = _add_relu
        inputs: tuple[Any, ...] = (torch.randn(1024, device=device),
                                   torch.randn(1024, device=device))
        variants = [("eager", None)] + [(label, kw) for label, kw in columns(settings)]
        if cuda:
            variants.append(("kernelscope_jit", {"backend": kernelscope(), "jit": True}))
            variants.append(("kernelscope_graphs",
                             {"backend": kernelscope({"cuda_graphs": True})}))
    else:
        if not cuda:
            row["skipped"] = "CUDA graphs need a GPU"
            return row
        if name == "graphs_chain10":
            fn, inputs = _chain10, (torch.randn(1024, device=device),)
        else:
            fn, inputs = case_table.by_name(["gpt2_block"])[0].make(device, settings["size"])
        variants = [("eager", None), ("inductor", {"backend": "inductor"}),
                    ("inductor_graphs", {"backend": "inductor", "mode": "reduce-overhead"}),
                    ("kernelscope", {"backend": kernelscope()}),
                    ("kernelscope_graphs", {"backend": kernelscope({"cuda_graphs": True})})]
    with torch.no_grad():
        with compiling():
            ref = fn(*inputs)
        for label, kw in variants:
            cell: dict[str, Any] = {}
            try:
                torch._dynamo.reset()
                kw = dict(kw or {})
                jit = kw.pop("jit", False)  # Triton's JIT launch path instead of ours
                os.environ["KERNELSCOPE_LAUNCH"] = "jit" if jit else "fast"
                call = fn if not kw else torch.compile(fn, **kw)
                with compiling():  # reduce-overhead records on the second and third calls
                    for _ in range(3):
                        out = call(*inputs)
                    cell["check"] = compare(out, ref,
                                            5e-2 if name == "graphs_gpt2_block" else 1e-3)
                with timing_lock():
                    cell["us"] = round(_per_call_us(lambda: call(*inputs), device), 1)
                    if name != "call_us":
                        cell["ms"] = median_ms(lambda: call(*inputs), device,
                                               settings["warmup"], settings["rep"])
            except Exception as e:  # noqa: BLE001
                cell["error"] = _error(e)
                print(f"[{label}] {traceback.format_exc()}", file=sys.stderr)
            row[label] = cell
    return row


def measure(item: str, settings: dict[str, Any]) -> dict[str, Any]:
    kind, name = item.split(":", 1)
    fn = {"case": measure_case, "model": measure_model, "overhead": measure_overhead,
          "stages": measure_stages, "train": measure_training,
          "infer": measure_inference}[kind]
    return fn(name, settings)
