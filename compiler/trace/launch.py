"""`kernelscope run --nproc N script.py`: a multi-process run recorded one trace per rank.

Starts N processes of `kernelscope run` on the script, each with the variables torchrun
sets (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so the
script's `init_process_group()` finds its rank and its peers. Each process records into
`rank<R>/` of the one trace directory (compiler/trace/ranks.py); `kernelscope open DIR`
opens rank 0 with the other ranks one click away. In: N, the script and its arguments,
the trace directory. Out: the first non-zero exit status of the ranks (0 if none).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import kernelscope.compiler


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, nproc: int, port: int) -> dict[str, str]:
    """The variables of rank `rank` of `nproc`, as torchrun sets them on one host."""
    root = str(Path(kernelscope.compiler.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "PYTHONPATH": path}


def run_ranks(nproc: int, script: str, args: list[str], trace_dir: Path, *,
              module: bool = False, all_backends: bool = False) -> int:
    port = _free_port()
    command = [sys.executable, "-m", "kernelscope.compiler", "run", "--trace-dir",
               str(trace_dir), *(["--all-backends"] if all_backends else []),
               *(["-m"] if module else []), script, *args]
    procs = [subprocess.Popen(command, env=rank_env(r, nproc, port)) for r in range(nproc)]
    codes = [p.wait() for p in procs]
    failed = [(r, c) for r, c in enumerate(codes) if c != 0]
    for rank, code in failed:
        print(f"kernelscope run: rank {rank} exited with status {code}", file=sys.stderr)
    print(f"kernelscope run: {nproc} ranks recorded into {trace_dir} (rank0 ... "
          f"rank{nproc - 1}); open them: kernelscope open {trace_dir}", file=sys.stderr)
    return failed[0][1] if failed else 0
