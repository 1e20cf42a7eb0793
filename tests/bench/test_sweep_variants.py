"""benchmarks/sweep.py compiles each variant of a rule afresh.

The whole-graph cache's key does not see a rule swapped in by the sweep, so variants that
shared the compile cache all ran the first variant's kernels (the 13:10 sweep of the
persistent-row rules timed one kernel five times). Each variant now compiles into a
cache of its own. Checked on the CPU through the Triton interpreter (a process of its
own: TRITON_INTERPRET must be set before Triton is imported); timings are never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, sys, tempfile
from pathlib import Path
import torch
from benchmarks.sweep import _rule, compile_variant

torch.manual_seed(0)
x = torch.randn(4, 5000)
fn = lambda x: torch.log_softmax(x, -1)
out = {}
for step in ("two_exp", "one_exp"):
    rule = {"LSE_STEP": step, "LSE_STEP_FEW_ROWS": step}
    with _rule("block_config", rule), tempfile.TemporaryDirectory() as d:
        y = compile_variant(fn, {"backend": "triton"}, d)(x)
        code = "".join(p.read_text() for p in Path(d).rglob("*.py"))
        out[step] = {"ok": bool(torch.allclose(y, fn(x), atol=1e-5)),
                     "one_exp": "tl.exp(tl.minimum(" in code, "kernels": "@triton.jit" in code}
print("RESULT " + json.dumps(out))
"""


def test_each_variant_runs_its_own_kernels(tmp_path: Path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "KERNELSCOPE_CACHE": str(tmp_path / "shared"),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, proc.stderr[-3000:]
    res = json.loads(lines[0][len("RESULT "):])
    assert res["two_exp"] == {"ok": True, "one_exp": False, "kernels": True}
    assert res["one_exp"] == {"ok": True, "one_exp": True, "kernels": True}
