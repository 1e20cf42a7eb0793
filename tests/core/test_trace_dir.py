"""Your own run: torch.compile(..., backend="kernelscope", options={"trace_dir": D}) in a
user's script writes one file per compiled graph, with the Dynamo compile (recompile and
its reason), the call site, the options, the versions and every stage's payload."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ks_helpers import REPO

from kernelscope.compiler.events.check import event_errors

SCRIPT = """import torch

def f(x):
    return torch.relu(x + 1)

cf = torch.compile(f, backend="kernelscope", options={{"trace_dir": {d!r}}})
cf(torch.randn(8))
cf(torch.randn(8, dtype=torch.float64))
"""


def test_trace_dir_records_every_compile_with_its_call_site(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    script = tmp_path / "mine.py"
    script.write_text(SCRIPT.format(d=str(out)))
    proc = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={"PYTHONPATH": str(REPO),
                                                       "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    files = sorted(out.glob("*.json"))
    records = [json.loads(p.read_text()) for p in files]
    assert [r["compile_id"] for r in records] == ["0/0", "0/1"]
    assert records[1]["recompile"] and "dtype" in records[1]["reasons"][0]
    assert [r["call_site"]["line"] for r in records] == [7, 8]
    for r in records:
        assert r["format"] == "kernelscope-trace" and r["versions"]["torch"]
        assert r["options"]["trace_dir"] == str(out)
        assert set(r["stages"]) == {"capture", "lowering", "scheduling", "memory", "codegen",
                                    "compile"}
        for stage in ("lowering", "scheduling", "codegen"):
            event = {"schema": 1, "seq": 0, "stage": stage, "ms": 0.0,
                     "data": {"graphs": [r["stages"][stage]]}}
            assert event_errors(event) == [], stage
