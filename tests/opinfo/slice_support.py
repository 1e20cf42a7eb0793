"""Runs a fixed slice of the OpInfo sweep for the CI tier and checks its statuses (the slice
tests call both).

In: the sweep's mode, dtypes and op names. Out: the aggregated per-op results
(`opinfo_harness.aggregate`) of `sweep.py` run in a subprocess on the C++ backend, with a
private compile cache, so a crash in one case is a recorded error, not a dead test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def run_slice(work: Path, ops: list[str], dtypes: str, samples: int, mode: str = "forward",
              timeout: float = 900) -> dict[str, dict[str, Any]]:
    sys.path.insert(0, str(HERE))
    from opinfo_harness import aggregate

    out = work / "cpp.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, str(HERE / "sweep.py"), "--target", "cpp", "--mode", mode,
           "--dtypes", dtypes, "--samples", str(samples), "--ops", ",".join(ops),
           "--jobs", "2", "--timeout", "120", "--no-report", "--output", str(out),
           "--work-dir", str(work), "--cache-dir", str(work / "cache")]
    subprocess.run(cmd, check=True, env=env, timeout=timeout, capture_output=True)
    cases = [json.loads(line) for line in out.read_text().splitlines()]
    assert cases
    return aggregate(cases)


def assert_status(results: dict[str, dict[str, Any]], op: str, expected: str) -> None:
    """The slice ran `op` and every case gave eager's answer with the status it keeps."""
    entry = results.get(op)
    assert entry is not None, f"{op}: no case ran"
    assert entry["status"] == expected, (entry["status"], entry["reason"], entry["dtypes"])
