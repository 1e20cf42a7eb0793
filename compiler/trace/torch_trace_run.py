"""`kernelscope run --inductor SCRIPT.py`: the script run as it is, stock torch.compile and
all, with torch's structured log (TORCH_TRACE) and Inductor's provenance tracking on; then
`kernelscope open` on the log (kernelscope/cli.py, which knows both halves, does that).

The script runs in a child process of its own, because torch reads TORCH_TRACE when it is
first imported; nothing of Kernelscope is loaded into it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def traced_env(trace_dir: Path) -> dict[str, str]:
    return {**os.environ, "TORCH_TRACE": str(trace_dir), "INDUCTOR_PROVENANCE": "1"}


def run_traced(script: str, args: list[str], trace_dir: Path, module: bool = False) -> int:
    """The script's exit code; its log is in `trace_dir` whatever the code."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, *(["-m", script] if module else [script]), *args]
    code = subprocess.call(command, env=traced_env(trace_dir))
    logs = list(trace_dir.glob("*.log"))
    print(f"kernelscope run: TORCH_TRACE log in {trace_dir} ({len(logs)} file(s)); "
          f"the script exited {code}", file=sys.stderr, flush=True)
    return code
