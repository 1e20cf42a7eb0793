"""A captured graph as a reproducer script (webui/js/repro.js): the script the Timings pane
offers for the recorded transformer block runs, compiles with the kernelscope backend and
finds our outputs equal to eager's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MAKE = """
import { readFileSync } from "node:fs";
import { reproducer } from "%s";
const trace = JSON.parse(readFileSync(process.argv[2]));
const data = (stage) => trace.events.find((e) => e.stage === stage).data;
process.stdout.write(reproducer(data("capture").graphs[0], data("source")));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_reproducer_of_a_recorded_graph_runs_and_matches_eager(tmp_path: Path) -> None:
    make = tmp_path / "make.mjs"
    make.write_text(MAKE % (REPO / "webui" / "js" / "repro.js").as_uri())
    script = subprocess.run(["node", str(make), str(HERE / "fixtures" / "profile_block.json")],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert "class Graph(torch.nn.Module):" in script
    assert "torch.empty_strided((2, 16, 64), (1024, 64, 1), dtype=torch.float32" in script
    path = tmp_path / "repro_graph0.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": str(REPO), "KERNELSCOPE_CACHE": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=300, env=env, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "outputs match eager" in run.stdout
    assert "kernelscope" in run.stdout and "ms per call" in run.stdout
