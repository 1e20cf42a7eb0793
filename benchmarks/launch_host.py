"""The wrapper's host time per call with Triton's launches stood in for: a CPU measurement
of the launch path (codegen/triton/launch.py) and the wrapper's own Python.

    TRITON_INTERPRET=1 python -m benchmarks.launch_host            # GPT-2-shaped, 12 layers
    TRITON_INTERPRET=1 python -m benchmarks.launch_host --layers 2 # quicker
    python -m benchmarks.launch_host --micro   # one call site: microseconds per launch

A GPT-2 small-shaped model (GPT-2 small's 12 layers and graph, tiny widths so the ATen
calls cost little) is compiled for training (forward and backward) with the Triton
backend under the interpreter, which writes the same wrapper a GPU gets. Its kernels are
then replaced by stand-ins of a compiled Triton kernel whose launcher does nothing, and
the launch path is told the tensors are on the device: what remains of a call is the
wrapper's Python, its allocations, its ATen calls and the launch path up to Triton's C
launcher. Per graph and per training step (forward + backward): microseconds per call
with the lean path, with a bare Python call per launch instead (the floor), and the
difference per launch. On a CPU the graphs' ATen calls (attention, products) run for real
and dominate a call: the difference per launch is only meaningful with --micro there.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

from kernelscope.compiler.codegen.triton import launch
from kernelscope.compiler.runtime import loader


class _Compiled:
    function, packed_metadata = None, None

    def _init_handles(self) -> None:
        pass

    @staticmethod
    def run(*args: Any) -> None:  # Triton's C launcher, doing nothing
        return None


class StandIn:
    """A `@triton.jit` function's stand-in: counts launches; builds nothing."""

    def __init__(self, fn: Any) -> None:
        self.arg_names = list(fn.arg_names)
        self.compiled = _Compiled()

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return lambda *args, **kwargs: None

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        return self.compiled


class Bare:
    """The floor: a launch is one Python call that does nothing."""

    def __getitem__(self, grid: Any) -> Callable[..., None]:
        return _nothing


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


def _record() -> list[tuple[Any, list[Any]]]:
    seen: list[tuple[Any, list[Any]]] = []
    plain = loader.CompiledGraph.__call__

    def call(self: Any, *args: Any) -> list[Any]:
        if not any(g is self for g, _ in seen):
            seen.append((self, [a.clone() if isinstance(a, torch.Tensor) else a
                                for a in (*args, *self.constants)]))
        return plain(self, *args)

    loader.CompiledGraph.__call__ = call  # type: ignore[method-assign]
    return seen


def _per_call_us(module: Any, args: list[Any], calls: int) -> float:
    module.call(list(args))
    best = float("inf")
    for _ in range(5):  # the thread's CPU time: a shared host's other load left out
        start = time.thread_time()
        for _ in range(calls):
            module.call(list(args))
        best = min(best, (time.thread_time() - start) / calls * 1e6)
    return best


def _count(module: Any, kernels: list[str], args: list[Any]) -> int:
    n = [0]

    class Counting(Bare):
        def __getitem__(self, grid: Any) -> Callable[..., None]:
            n[0] += 1
            return _nothing

    for k in kernels:
        setattr(module, k, Counting())
    module.call(list(args))
    return n[0]


def measure(layers: int, calls: int) -> list[dict[str, Any]]:
    import transformers

    launch._on_device = lambda t: True  # type: ignore[assignment]
    launch._stream = lambda device: 0  # type: ignore[assignment]
    cfg = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=128,
                                  n_positions=64, use_cache=False)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 128, (2, 16))
    seen = _record()
    step = torch.compile(lambda: model(input_ids=ids, labels=ids).loss.backward(),
                         backend="kernelscope", options={"backend": "triton"})
    step()
    rows = []
    for graph, args in seen:
        module, kernels = graph.module, graph.kernels
        real = {k: getattr(module, k) for k in kernels}
        launches = _count(module, kernels, args)
        for k in kernels:
            setattr(module, k, launch.FastKernel(StandIn(real[k])))
        lean = _per_call_us(module, args, calls)
        for k in kernels:
            setattr(module, k, Bare())
        floor = _per_call_us(module, args, calls)
        for k in kernels:
            setattr(module, k, real[k])
        rows.append({"launches": launches, "us_per_call": round(lean, 1),
                     "us_floor": round(floor, 1),
                     "us_per_launch": round((lean - floor) / max(launches, 1), 3)})
        print(f"graph: {launches} launches, {lean:.1f} us per call, {floor:.1f} us with bare "
              f"calls: {(lean - floor) / max(launches, 1):.3f} us per launch above a bare "
              "call", flush=True)
    total = sum(r["us_per_call"] for r in rows)
    print(f"step (all graphs): {sum(r['launches'] for r in rows)} launches, {total:.1f} us")
    return rows


def micro(launches: int = 20000) -> dict[str, float]:
    """One call site of 3 inputs and 2 outputs (the outputs the wrapper's own buffers,
    where the wrapper declares them): microseconds of CPU time per launch, best of 9."""
    launch._on_device = lambda t: True  # type: ignore[assignment]
    launch._stream = lambda device: 0  # type: ignore[assignment]

    class Fn:
        arg_names = ["in_ptr0", "in_ptr1", "in_ptr2", "out_ptr0", "out_ptr1", "xnumel",
                     "XBLOCK"]

    a, b, c, o, p = (torch.zeros(64) for _ in range(5))

    def per_launch(kernel: Any) -> float:
        kernel[(4,)](a, b, c, o, p, 2048, XBLOCK=1024, num_warps=4)
        best = float("inf")
        for _ in range(9):  # the thread's CPU time: a shared host's other load left out
            start = time.thread_time()
            for _ in range(launches):
                kernel[(4,)](a, b, c, o, p, 2048, XBLOCK=1024, num_warps=4)
            best = min(best, (time.thread_time() - start) / launches * 1e6)
        return best

    try:
        declared = launch.FastKernel(StandIn(Fn()), aligned=[3, 4])
    except TypeError:  # a launch path without declared alignment
        declared = launch.FastKernel(StandIn(Fn()))
    out = {"lean_us": per_launch(launch.FastKernel(StandIn(Fn()))),
           "lean_declared_us": per_launch(declared), "bare_us": per_launch(Bare())}
    print(" ".join(f"{k}={v:.3f}" for k, v in out.items()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--micro", action="store_true", help="one call site, per launch")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.micro:
        micro()
    else:
        measure(args.layers, args.calls)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
