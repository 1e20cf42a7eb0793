"""Kernels and the bytes each loads and stores, from the compiler's own plan for Triton, no
kernel run: a suite case at its GPU size, or the training benchmark's GPT-2 small step.

Bytes are the sizes of the buffers a kernel loads (each once) and stores (the memory plan's
buffers): what a kernel moves at best, the measure its time is judged by. Run it in two
checkouts (or with `--ks-options`) to compare schedules.

    python -m benchmarks.kernel_bytes --cases layernorm_backward,gelu_bias_grad
    python -m benchmarks.kernel_bytes --train --top 12   # GPT-2 small 8x512 (a minute or two)
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from typing import Any

os.environ.setdefault("TRITON_INTERPRET", "1")  # Triton on a CPU host: emulated, never run

import torch  # noqa: E402


def case_graphs(name: str, size: str) -> list[tuple[str, torch.fx.GraphModule, list[Any]]]:
    """A suite case's ATen graphs (our decompositions), as the backend receives them."""
    from torch._functorch.aot_autograd import aot_module_simplified, make_boxed_func

    from benchmarks.cases import BACKWARD_CASES, CASES
    from kernelscope.compiler.capture.decompositions import decomposition_table

    fn, args = {c.name: c for c in CASES + BACKWARD_CASES}[name].make("cpu", size)
    graphs: list[tuple[str, torch.fx.GraphModule, list[Any]]] = []

    def keep(gm: torch.fx.GraphModule, inputs: Sequence[Any]) -> Any:
        graphs.append((name, gm, list(inputs)))
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(fn, backend=lambda gm, inputs: aot_module_simplified(
            gm, inputs, fw_compiler=keep, decompositions=decomposition_table()))(*args)
    return graphs


def kernel_rows(gm: torch.fx.GraphModule, inputs: list[Any], kind: str,
                options: dict[str, Any]) -> list[dict[str, Any]]:
    """Each generated kernel of one graph: name, iteration space, bytes loaded and stored."""
    from kernelscope.compiler.compile_fx import lower, memory_stage, schedule_stage
    from kernelscope.compiler.graph_work import GraphWork
    from kernelscope.compiler.options import CompileOptions

    opts = CompileOptions(**{"device": "cpu", "backend": "triton", "profile": False, **options})
    work = GraphWork(0, gm, inputs, opts, kind=kind)
    with torch.no_grad():
        lower(work)
        sched = schedule_stage(work)
        memory_stage(work)
    assert work.sched is not None
    size = {name: b.layout.nbytes() for name, b in work.sched.buffers.items()}
    rows = []
    for step in work.sched.steps:
        if step.plan is None:
            continue
        p = step.plan
        rows.append({"kernel": p.name, "x": p.xnumel, "r": p.rnumel,
                     "loads": sum(size.get(n, 0) for n in p.inputs),
                     "stores": sum(size.get(n, 0) for n in p.stores)})
    assert len(rows) == sum(1 for k in sched.kernels if k.kind != "extern")
    return rows


def report(label: str, rows: list[dict[str, Any]], top: int) -> None:
    moved = sum(r["loads"] + r["stores"] for r in rows)
    print(f"{label}: {len(rows)} kernels, {moved / 1e6:.1f} MB moved "
          f"({sum(r['loads'] for r in rows) / 1e6:.1f} loaded, "
          f"{sum(r['stores'] for r in rows) / 1e6:.1f} stored)")
    for r in sorted(rows, key=lambda r: -(r["loads"] + r["stores"]))[:top]:
        print(f"  {(r['loads'] + r['stores']) / 1e6:9.2f} MB  load {r['loads'] / 1e6:8.2f}  "
              f"store {r['stores'] / 1e6:8.2f}  {r['x']} x {r['r']}  {r['kernel']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="layernorm_backward,gelu_bias_grad")
    p.add_argument("--size", choices=("gpu", "cpu", "smoke"), default="gpu")
    p.add_argument("--train", action="store_true", help="the GPT-2 small step instead")
    p.add_argument("--ks-options", default="{}", help="compile options (JSON)")
    p.add_argument("--top", type=int, default=40, help="kernels listed per graph")
    args = p.parse_args(argv)
    options = json.loads(args.ks_options)
    if args.train:
        from benchmarks.realize_count import capture

        graphs = capture("smoke" if args.size == "smoke" else "full")
    else:
        graphs = [g for name in args.cases.split(",") for g in case_graphs(name, args.size)]
    for kind, gm, inputs in graphs:
        report(kind, kernel_rows(gm, inputs, kind, options), args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
