"""A multi-process run, one trace per rank: `kernelscope run --nproc 2 script.py` starts
the script twice as torchrun would (RANK, WORLD_SIZE, MASTER_ADDR/PORT), each rank records
into `rank<R>/` (compiler/trace/ranks.py), and `kernelscope open DIR` stores rank 1, then
rank 0 with a link to it, and prints rank 0's permalink."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_own_run import kernelscope

from kernelscope.compiler.trace.ranks import rank_dir, rank_dirs, rank_zero_files
from kernelscope.compiler.trace.reader import RUN_FILE

SCRIPT = """import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fcol

dist.init_process_group("gloo")
rank = dist.get_rank()

def f(x):
    return fcol.all_reduce(x.sin(), "sum", dist.group.WORLD) * 2

out = torch.compile(f, backend="kernelscope")(torch.full((8,), float(rank)))
want = (torch.tensor(0.0).sin() + torch.tensor(1.0).sin()) * 2
assert torch.allclose(out, want.expand(8)), (rank, out)
dist.destroy_process_group()
"""


def test_a_rank_writes_into_its_own_folder(monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    monkeypatch.delenv("RANK", raising=False)
    assert rank_dir(tmp_path) == tmp_path
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert rank_dir(tmp_path) == tmp_path  # a world of one is no multi-process run
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert rank_dir(tmp_path) == tmp_path / "rank1"


def test_rank_zero_links_every_other_rank(tmp_path: Path) -> None:
    for rank in (0, 1, 2):
        (tmp_path / f"rank{rank}").mkdir()
        (tmp_path / f"rank{rank}" / "g.json").write_text(json.dumps({"rank": rank}))
    (tmp_path / "rank10x").mkdir()  # not a rank folder
    (tmp_path / RUN_FILE).write_text(json.dumps({"format": "kernelscope-run", "argv": ["s.py"]}))
    ranks = rank_dirs(tmp_path)
    assert [r for r, _ in ranks] == [0, 1, 2]
    stored: list[list[tuple[str, bytes]]] = []

    def put(files: list[tuple[str, bytes]]) -> str:
        stored.append(files)
        return f"/t/r{len(stored)}"

    files = rank_zero_files(tmp_path, ranks, put)
    assert [json.loads(f[0][1])["rank"] for f in stored] == [1, 2]
    run = json.loads(dict(files)[RUN_FILE])
    assert run["argv"] == ["s.py"] and run["rank"] == 0 and run["world_size"] == 3
    assert run["ranks"] == [{"rank": 1, "url": "/t/r1"}, {"rank": 2, "url": "/t/r2"}]
    assert json.loads(dict(files)["g.json"]) == {"rank": 0}


def test_run_nproc_records_each_rank_and_open_links_them(tmp_path: Path) -> None:
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    out = tmp_path / "trace"
    proc = kernelscope("run", "--nproc", "2", "--trace-dir", str(out), str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        folder = out / f"rank{rank}"
        run = json.loads((folder / RUN_FILE).read_text())
        assert run["rank"] == rank and run["world_size"] == 2 and run["exit"] == 0
        assert [p for p in folder.glob("*_compile_*.json")], os.listdir(folder)
    db = tmp_path / "traces.sqlite3"
    proc = kernelscope("open", str(out), "--db", str(db), "--no-serve", "--no-browser")
    assert proc.returncode == 0, proc.stderr
    ident = proc.stdout.strip().rsplit("/t/", 1)[1]
    from kernelscope.server.store.sqlite import TraceStore

    store = TraceStore(db)
    recorded = store.get(ident)["options"]["recorded"]  # type: ignore[index]
    assert recorded["rank"] == 0 and recorded["world_size"] == 2
    (link,) = recorded["ranks"]
    other = store.get(link["url"].removeprefix("/t/"))
    assert link["rank"] == 1 and other is not None
    lowering = next(e for e in other["events"] if e["stage"] == "lowering")
    calls = [b["extern"]["collective"] for g in lowering["data"]["graphs"]
             for b in g["buffers"] if b["extern"].get("collective")]
    assert [c["kind"] for c in calls] == ["all-reduce"]
