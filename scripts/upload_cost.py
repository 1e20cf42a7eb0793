"""The web tier's share of one upload: the 300-graph upload of the attack tests (graph files
named with 10 characters, 1.4 MB of events), its child's answer read and the trace stored
in SQLite, timed in this process (the child runs once, first, untimed). Prints the median
and the max of `--runs`.

    PYTHONPATH=$PWD python scripts/upload_cost.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "server"), str(REPO / "tests")]

from attack_support import many_graphs  # noqa: E402
from own_run_support import files_of, record_run  # noqa: E402

from kernelscope.server.store.sqlite import TraceStore  # noqa: E402
from kernelscope.server.web import uploads  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="upload-cost-"))
    body = json.dumps({"files": many_graphs(files_of(record_run(tmp / "run")), 300, 10)})
    raw = subprocess.run([*uploads.OPENER, str(8 << 20)], input=body.encode(), check=True,
                         capture_output=True, cwd=REPO).stdout
    times = []
    for i in range(args.runs):
        store = TraceStore(tmp / f"t{i}.sqlite3")
        start = time.perf_counter()
        store.put_prepared(uploads._answer(raw, 0).trace)
        times.append(time.perf_counter() - start)
    print(f"answer {len(raw)} bytes; web tier per upload: median "
          f"{statistics.median(times) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
