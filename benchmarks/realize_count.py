"""What each realize rule makes of a GPT-2-small training step for the Triton target,
counted from the compiler's own plan, no kernel run (lowering/realize.py says the rules).

The step is the training benchmark's (benchmarks/training.py: GPT-2 small, 8x512, LM
loss, bf16 autocast; here on the CPU, so CPU autocast's casts). AOTAutograd's forward and
backward graphs are captured with stand-in compilers that return empty tensors of the
outputs' shapes, so the model never computes; each graph is then lowered, scheduled and
memory-planned for the Triton backend under each rule, as the explorer's stages do.
Printed per graph and rule: computed buffers (pointwise and reduction bodies stored), the
bytes they store, generated kernels, the memory plan's peak with and without reuse, and
the stored buffers by reason.

    python -m benchmarks.realize_count                 # GPT-2 small, 8x512 (a minute or two)
    python -m benchmarks.realize_count --size smoke    # the tiny config, seconds
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton on a CPU host: emulated, never run

import torch  # noqa: E402

from kernelscope.compiler.lowering.realize import RULES  # noqa: E402


def _empty_like_outputs(gm: torch.fx.GraphModule) -> Callable[[list[Any]], list[Any]]:
    """A stand-in for a compiled graph: empty tensors of its outputs' shapes and strides."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    vals = [getattr(a, "meta", {}).get("val") if isinstance(a, torch.fx.Node) else a
            for a in out.args[0]]

    def made(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
        return v

    def run(args: list[Any]) -> list[Any]:
        args.clear()
        return [made(v) for v in vals]

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def capture(size: str) -> list[tuple[str, torch.fx.GraphModule, list[Any]]]:
    """The training step's ATen graphs (kind, graph, example inputs), AOTAutograd's min-cut
    partition, as the backend receives them."""
    from benchmarks.training import by_name, step_fn
    from kernelscope.compiler.capture.aot import through_aot

    graphs: list[tuple[str, torch.fx.GraphModule, list[Any]]] = []

    def keep(kind: str) -> Callable[..., Any]:
        def compiler(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Any:
            graphs.append((kind, gm, list(inputs)))
            return _empty_like_outputs(gm)
        return compiler

    def backend(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        return through_aot(gm, inputs, "min_cut", fw_compiler=keep("forward"),
                           bw_compiler=keep("backward"), inference_compiler=keep("inference"))

    torch.manual_seed(0)
    model, batch, loss_fn = by_name(["gpt2_small"])[0].make("cpu", size == "smoke")
    torch._dynamo.reset()
    step_fn(torch.compile(model, backend=backend), batch, loss_fn, "cpu",
            list(model.parameters()))()
    return graphs


def plan(kind: str, gm: torch.fx.GraphModule, inputs: list[Any], rule: str) -> dict[str, Any]:
    """Lowering, scheduling and the memory plan of one graph for Triton under `rule`."""
    from kernelscope.compiler.compile_fx import lower, memory_stage, schedule_stage
    from kernelscope.compiler.graph_work import GraphWork
    from kernelscope.compiler.ir.nodes import ComputedBuffer
    from kernelscope.compiler.options import CompileOptions

    options = CompileOptions(device="cpu", backend="triton", realize=rule, profile=False)
    work = GraphWork(0, gm, inputs, options, kind=kind)
    t0 = time.perf_counter()
    with torch.no_grad():
        lower(work)
        sched = schedule_stage(work)
        memory = memory_stage(work)
    assert work.lowered is not None
    computed = [b for b in work.lowered.buffers if isinstance(b, ComputedBuffer)]
    reasons = Counter(_reason_kind(b.realized) for b in computed)
    return {"buffers": len(computed),
            "stored_mb": sum(_bytes(b) for b in computed) / 1e6,
            "shared_mb": sum(_bytes(b) for b in computed if "consumers" in b.realized) / 1e6,
            "kernels": sum(1 for k in sched.kernels if k.kind != "extern"),
            "peak_mb": memory.peak_bytes / 1e6,
            "peak_no_reuse_mb": memory.peak_bytes_no_reuse / 1e6,
            "reasons": dict(reasons), "ms": (time.perf_counter() - t0) * 1000}


def _bytes(b: Any) -> int:
    lay = b.layout
    extent = 1 + sum((s - 1) * st for s, st in zip(lay.size, lay.stride)) \
        if all(lay.size) else 0
    return extent * lay.dtype.itemsize


def _reason_kind(reason: str) -> str:
    """A buffer's reason without its counts ("used by 3 consumers" -> "used by N ...")."""
    words = ["N" if w.strip("(,").isdigit() else w for w in reason.split(":")[0].split()]
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=("full", "smoke"), default="full")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    graphs = capture(args.size)
    print(f"captured {len(graphs)} graphs in {time.perf_counter() - t0:.1f} s "
          f"(GPT-2 small{' smoke' if args.size == 'smoke' else ', 8x512'}, bf16 autocast "
          "on the CPU, min-cut partition); Triton target, nothing run")
    head = ("graph", "rule", "buffers", "stored MB", "of them shared MB", "kernels",
            "peak MB", "peak no reuse MB", "lower+plan ms")
    print(" | ".join(head))
    totals: dict[str, Counter[str]] = {r: Counter() for r in RULES}
    for kind, gm, inputs in graphs:
        for rule in RULES:
            row = plan(kind, gm, inputs, rule)
            for key in ("buffers", "stored_mb", "shared_mb", "kernels"):
                totals[rule][key] += row[key]
            print(f"{kind} | {rule} | {row['buffers']} | {row['stored_mb']:.1f} | "
                  f"{row['shared_mb']:.1f} | {row['kernels']} | {row['peak_mb']:.1f} | "
                  f"{row['peak_no_reuse_mb']:.1f} | {row['ms']:.0f}")
            for reason, n in sorted(row["reasons"].items(), key=lambda kv: -kv[1]):
                print(f"    {n:4d} x {reason}")
    for rule in RULES:
        t = totals[rule]
        print(f"step total | {rule} | {t['buffers']} buffers | {t['stored_mb']:.1f} MB stored "
              f"({t['shared_mb']:.1f} MB shared values) | {t['kernels']} kernels")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
