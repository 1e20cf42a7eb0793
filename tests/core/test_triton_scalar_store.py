"""A reduction to one element (F.cross_entropy's mean) is stored through a block of
pointers: a scalar pointer with a block value and mask did not compile on the GPU
("Value argument cannot be block type if pointer argument is not a block")."""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from kernelscope.compiler.capture.dynamo import Recorder
from kernelscope.compiler.compile_fx import (
    codegen_stage,
    lower,
    memory_stage,
    schedule_stage,
)
from kernelscope.compiler.graph_work import GraphWork
from kernelscope.compiler.options import CompileOptions


def _triton_sources(fn, *args) -> list[str]:  # type: ignore[no-untyped-def]
    rec = Recorder()
    torch._dynamo.reset()
    torch.compile(fn, backend=rec.backend)(*args)
    out = []
    for i, g in enumerate(rec.graphs):
        work = GraphWork(i, g.gm, g.example_inputs, CompileOptions(backend="triton"))
        lower(work)
        schedule_stage(work)
        memory_stage(work)
        event = codegen_stage(work)
        out += [k.source for k in event.kernels]
    return out


def test_scalar_results_are_stored_through_a_block_of_pointers() -> None:
    logits, target = torch.randn(8, 1000), torch.randint(0, 1000, (8,))
    sources = _triton_sources(F.cross_entropy, logits, target)
    stores = [ln for src in sources for ln in src.splitlines() if "tl.store(" in ln]
    assert stores
    for line in stores:
        assert not re.search(r"tl\.store\(\w+ \+ \(\d+\), \w+, xmask\)", line), line
    assert any("tl.full([XBLOCK, 1], 0, tl.int32)" in ln for ln in stores)
