"""The compile pool of processes against the threads alone, on one sample compiled under
Triton's interpreter with its offline reports for sm_90 (a CPU host), or on a GPU.

    PYTHONPATH=$PWD python scripts/compile_pool.py --sample transformer_block --mode process
    PYTHONPATH=$PWD python scripts/compile_pool.py --sample transformer_block --mode thread

Each run compiles in a fresh KERNELSCOPE_CACHE with compile_workers as given (default 2)
and prints the compile stage's time and the pool's own. `--mode thread` leaves the
process pool out (the threads of codegen/triton/pool.py and the offline child's own).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import sys
from kernelscope.compiler.codegen.triton.backend import TritonBackend
if sys.argv[1] == "thread":
    TritonBackend.pool_build = lambda self, items: {}
from kernelscope.compiler.cli import main
sys.exit(main(sys.argv[2:]))
"""


def run(sample: str, mode: str, workers: int, device: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="ks-pool-") as cache:
        env = {**os.environ, "KERNELSCOPE_CACHE": cache, "PYTHONPATH": str(REPO)}
        argv = ["compile", str(REPO / "samples" / f"{sample}.py"), "--json", "--device",
                device, "--backend", "triton", "--no-profile", "--options",
                json.dumps({"compile_workers": workers})]
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, mode, *argv], env=env,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
    events = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    compile_ = next((e for e in events if e["stage"] == "compile"), None)
    if compile_ is None:
        raise SystemExit(proc.stderr[-3000:])
    pools = [g["prebuild"].get("pool", {}) for g in compile_["data"]["graphs"]]
    return {"mode": mode, "workers": workers, "wall_s": round(wall, 1),
            "compile_ms": compile_["ms"], "pool_ms": [p.get("ms") for p in pools],
            "fallback": [p.get("fallback") for p in pools],
            "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample", default="transformer_block")
    ap.add_argument("--mode", choices=["process", "thread"], default="process")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    print(json.dumps(run(args.sample, args.mode, args.workers, args.device)))


if __name__ == "__main__":
    main()
