"""One trace per rank of a multi-process run (DDP, FSDP, any torch.distributed job).

Every rank compiles its own graphs, so each writes its own trace: into `rank<R>/` under
the trace directory, once the process knows it is rank R of more than one (an initialized
process group, else the RANK and WORLD_SIZE that torchrun and `kernelscope run --nproc`
set). `kernelscope open DIR` opens every rank's folder and stores rank 0 last, with a
link to each other rank's trace (server/open_cmd.py). In: the trace directory. Out: the
folder this process writes into, and the rank folders a directory holds.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelscope.compiler.trace.reader import RUN_FILE, RUN_FORMAT, VERSION, read_dir

_RANK_DIR = re.compile(r"rank(\d+)")


def process_rank() -> tuple[int, int] | None:
    """(rank, world size) of this process in a run of more than one process, else None."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return dist.get_rank(), dist.get_world_size()
    except (ImportError, RuntimeError, ValueError):
        pass
    rank, world = os.environ.get("RANK", ""), os.environ.get("WORLD_SIZE", "")
    if rank.isdigit() and world.isdigit() and int(world) > 1:
        return int(rank), int(world)
    return None


def rank_dir(root: Path) -> Path:
    """Where this process writes its trace files: `root/rank<R>` for rank R of a
    multi-process run, else `root`."""
    found = process_rank()
    return root if found is None else root / f"rank{found[0]}"


def rank_dirs(root: Path) -> list[tuple[int, Path]]:
    """The rank folders of a trace directory, by rank (empty: a one-process trace)."""
    if not root.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in root.iterdir()
                  if p.is_dir() and (m := _RANK_DIR.fullmatch(p.name)))


def rank_zero_files(root: Path, ranks: list[tuple[int, Path]],
                    put: Callable[[list[tuple[str, bytes]]], str]) -> list[tuple[str, bytes]]:
    """Every rank but the first stored with `put` (which returns its trace's path), and the
    first rank's files, its run.json naming the others' traces (the run's own run.json,
    beside the rank folders, where the rank has none: a script that spawned its ranks)."""
    links = [{"rank": rank, "url": put(read_dir(folder))} for rank, folder in ranks[1:]]
    first, folder = ranks[0]
    files = [(n, b) for n, b in read_dir(folder) if n != RUN_FILE]
    own = folder / RUN_FILE
    run_file = own if own.is_file() else root / RUN_FILE
    run: dict[str, Any] = json.loads(run_file.read_bytes()) if run_file.is_file() else {
        "format": RUN_FORMAT, "version": VERSION, "argv": [], "calls": []}
    run.update(rank=first, world_size=len(ranks), ranks=links)
    return [*files, (RUN_FILE, json.dumps(run).encode())]
