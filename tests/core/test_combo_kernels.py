"""Horizontal fusion (schedule/horizontal.py): an optimizer step's per-parameter kernels
launched as a few combo kernels, on C++ and on Triton (under its interpreter), with the
parameters eager's after every step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ks_helpers import REPO, lower_fn

from kernelscope.compiler.codegen.backends import choose_backend
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.schedule.horizontal import combo_runs
from kernelscope.compiler.schedule.inplace import in_place_outputs
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.scheduler import Schedule, schedule

TRITON = choose_backend("triton", "cpu", CompileOptions())


def _adamw_graph() -> tuple[object, object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64),
                                torch.nn.Linear(64, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    (gm, lowered), = lower_fn(lambda: opt.step())
    return gm, lowered


def _generated(s: Schedule) -> list[str]:
    return [st.name for st in s.steps if st.kind is not KernelKind.EXTERN]


def test_adamw_updates_and_step_counts_are_two_combo_kernels_not_twelve() -> None:
    _, lowered = _adamw_graph()
    alone = schedule(lowered, TRITON, combos=False)
    assert len(_generated(alone)) == 12  # per parameter: its update and its step count
    # The step counts may be written over their inputs (AOTAutograd's mutations), which
    # the updates read: they stay apart, each group one kernel.
    counts = {p.nodes[0].name: next(iter(p.inputs)) for st in alone.steps
              if (p := st.plan) is not None and p.xnumel == 1}
    s = schedule(lowered, TRITON, combos=True, aliases=counts)
    assert [st.kind for st in s.steps] == [KernelKind.COMBO, KernelKind.COMBO]
    assert [len(st.plan.parts) for st in s.steps] == [6, 6]  # type: ignore[union-attr]
    joined = [d for d in s.decisions if d.kind == "combo" and d.fused]
    refused = [d for d in s.decisions if d.kind == "combo" and not d.fused]
    assert len(joined) == 10 and "independent pointwise" in joined[0].reason
    assert len(refused) == 1 and "which the run reads" in refused[0].reason
    # Written over its input in its combo: no other part there reads the input.
    steps = [(st.writes(), st.reads()) for st in s.steps]
    chosen = in_place_outputs(counts, steps, [st.plan for st in s.steps], s.buffers)
    assert chosen == counts


def test_a_part_that_reads_an_input_another_part_overwrites_is_not_written_in_place() -> None:
    _, lowered = _adamw_graph()
    alone = schedule(lowered, TRITON, combos=False)
    counts = {p.nodes[0].name: next(iter(p.inputs)) for st in alone.steps
              if (p := st.plan) is not None and p.xnumel == 1}
    s = schedule(lowered, TRITON, combos=True)  # no aliases given: one combo of all 12
    assert len(s.steps) == 1 and len(s.steps[0].plan.parts) == 12  # type: ignore[union-attr]
    steps = [(st.writes(), st.reads()) for st in s.steps]
    assert in_place_outputs(counts, steps, [st.plan for st in s.steps], s.buffers) == {}


def test_dependent_kernels_are_not_combined() -> None:
    x, w = torch.randn(64, 32), torch.randn(32)

    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = x.sum(1)  # a reduction between two pointwise kernels
        return (x * s[:, None]).sin(), w.cos()

    (_, lowered), = lower_fn(f, x, w)
    plain = schedule(lowered, TRITON, combos=False)
    runs, decisions = combo_runs([st.plan for st in plain.steps],
                                 {"cpu": TRITON.combo_refusal})
    for run in runs:
        plans = [plain.steps[i].plan for i in run]
        writes = {w for p in plans for w in p.written}  # type: ignore[union-attr]
        assert not any(set(p.inputs) & writes for p in plans)  # type: ignore[union-attr]
    assert all(d.kind == "combo" for d in decisions)


SCRIPT = """import json, sys, torch
from kernelscope.compiler import backend as kernelscope
torch.manual_seed(0)
def make():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.LayerNorm(64),
                            torch.nn.Linear(64, 10))
    return m, torch.optim.AdamW(m.parameters(), lr=1e-2)
eager, opt_e = make()
ours, opt_o = make()
step = torch.compile(lambda: opt_o.step(), backend=kernelscope,
                     options={{"backend": {backend!r}, "trace_dir": {trace!r}}})
worst = 0.0
for i in range(3):
    for pe, po in zip(eager.parameters(), ours.parameters()):
        g = torch.randn_like(pe)
        pe.grad, po.grad = g.clone(), g.clone()
    opt_e.step()
    step()
    for pe, po in zip(eager.parameters(), ours.parameters()):
        worst = max(worst, (pe - po).abs().max().item())
print(json.dumps({{"worst": worst}}))
"""


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_compiled_adamw_step_in_combo_kernels_matches_eager(backend: str, tmp_path: Path
                                                              ) -> None:
    trace = tmp_path / "trace"
    script = tmp_path / "step.py"
    script.write_text(SCRIPT.format(backend=backend, trace=str(trace)))
    # The caller's environment (a device host's PYTHONPATH names its wheels), this tree
    # first; the backend is passed as the function, so no entry point need be installed.
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    worst = json.loads(proc.stdout.strip().splitlines()[-1])["worst"]
    assert worst <= 1e-6, worst
    records = [json.loads(p.read_text()) for p in sorted(trace.glob("*.json"))]
    kernels = [k for r in records for k in r["stages"]["scheduling"]["kernels"]
               if k["kind"] != "extern"]
    assert [k["kind"] for k in kernels] == ["combo", "combo"], [k["name"] for k in kernels]
    assert sorted(len(k["parts"]) for k in kernels) == [6, 6]
    code = [k for r in records for k in r["stages"]["codegen"]["kernels"]]
    assert len(code) == 2 and all("_part5" in k["source"] for k in code)
