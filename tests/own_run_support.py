"""A recorded run of a tiny script (`kernelscope run`), for the tests that open one: the
server's upload endpoint (tests/server) and the web UI's upload (tests/browser)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """import torch
torch._dynamo.config.recompile_limit = 4
def f(x):
    y = torch.relu(x + 1)
    print("a graph break")
    return y * 2

cf = torch.compile(f, backend="kernelscope")
cf(torch.randn(8))
cf(torch.randn(8, dtype=torch.float64))
"""


def record_run(folder: Path) -> Path:
    """Runs SCRIPT under `kernelscope run` on the CPU; returns its trace directory."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "mine.py"
    script.write_text(SCRIPT)
    out = folder / "trace"
    proc = subprocess.run(
        [sys.executable, "-m", "kernelscope.compiler", "run", "--trace-dir", str(out),
         str(script)], cwd=REPO, capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def files_of(trace_dir: Path) -> list[dict[str, str]]:
    """The directory as the upload endpoint takes it."""
    return [{"name": p.name, "text": p.read_text()} for p in sorted(trace_dir.glob("*.json"))]


def with_versions(files: list[dict[str, str]], **changes: Any) -> list[dict[str, str]]:
    """The same files, as if written where other versions are installed (keys of a
    record's `versions`, or `version` for the file format itself)."""
    out = []
    for f in files:
        record = json.loads(f["text"])
        if record.get("format") == "kernelscope-trace":
            for key, value in changes.items():
                if key == "version":
                    record["version"] = value
                else:
                    record["versions"][key] = value
        out.append({"name": f["name"], "text": json.dumps(record)})
    return out
