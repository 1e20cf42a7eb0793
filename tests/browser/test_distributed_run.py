"""A multi-process run in the browser: rank 0's trace opens with a link to rank 1's, and
the run panel's distributed section lists each graph's DDP bucket split (with its reason)
and its collectives with their sizes; the memory pane marks the buffers a collective holds
until its wait.

The graphs are recorded for real (a function that all-reduces, compiled on a gloo group of
one, in a subprocess); the DDP split is then written into one record as DDPOptimizer's
recording writes it (tests/models/test_ddp.py checks a real DDP step's), so the panel has
both to show. Both ranks go through `kernelscope open`'s storing path (rank_zero_files)
and the real server's upload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from browser_support import LiveServer, page_errors, screenshot
from playwright.sync_api import Page, expect
from ui import show_tab, wait_done

from kernelscope.compiler.trace.ranks import rank_dirs, rank_zero_files

pytestmark = pytest.mark.browser
REPO = Path(__file__).resolve().parents[2]
SCRIPT = """import sys, torch, torch.distributed as dist
import torch.distributed._functional_collectives as fcol
dist.init_process_group("gloo", store=dist.FileStore(sys.argv[2], 1), rank=0, world_size=1)
def f(x):
    return fcol.all_reduce(x.sin(), "sum", dist.group.WORLD) * 2
torch.compile(f, backend="kernelscope", options={"trace_dir": sys.argv[1]})(torch.randn(64))
dist.destroy_process_group()
"""
SPLIT = {"by": "DDPOptimizer", "index": 0, "count": 2, "bucket_bytes": 1 << 20,
         "bucket_cap": 1 << 20, "params": ["blocks.2.fc2.weight"],
         "reason": "DDP gradient bucket 1 of 2 (1.00 MB of parameters, bucket cap 1.00 MB)"}


@pytest.fixture(scope="module")
def ranks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ranks")
    script = root / "record.py"
    script.write_text(SCRIPT)
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("RANK", None)
        subprocess.run([sys.executable, str(script), str(root / f"rank{rank}"),
                        str(root / f"store{rank}")], check=True, env=env, timeout=300)
    (record,) = (root / "rank0").glob("*.json")
    data = json.loads(record.read_text())
    record.write_text(json.dumps({**data, "split": SPLIT}))
    return root


def test_rank_zero_links_rank_one_and_shows_splits_collectives_and_holds(
        new_page: Callable[[str], Page], live_server: LiveServer, ranks_dir: Path) -> None:
    from kernelscope.server.open_cmd import upload

    files = rank_zero_files(ranks_dir, rank_dirs(ranks_dir),
                            lambda fs: str(upload(live_server.url, fs)["url"]))
    url = upload(live_server.url, files)["url"]
    page = new_page(live_server.url)
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]")
    wait_done(page)
    panel = page.locator(".run-panel")
    expect(panel.locator(".run-ranks .rank-tag")).to_have_text("rank 0 of 2")
    link = panel.locator(".run-ranks a.rank-link")
    expect(link).to_have_text("rank 1")
    section = panel.locator(".run-distributed")
    row = section.locator("tr[data-graph='0']")
    expect(row).to_contain_text("DDPOptimizer: bucket 1 of 2")
    expect(row).to_contain_text("1 all-reduce (256 B in, 256 B out)")
    expect(row).to_contain_text("2 buffers")
    assert "bucket 1 of 2" in (row.locator("td").nth(1).get_attribute("title") or "")
    show_tab(page, "memory")
    expect(page.locator("svg.lifetimes g.mbar.held")).to_have_count(2)
    title = page.locator("svg.lifetimes g.mbar.held title").first.text_content() or ""
    assert "held by extern_all_reduce" in title and "until extern_wait_tensor" in title
    screenshot(page, "distributed-rank0")
    href = link.get_attribute("href")
    assert href and href.startswith("/t/") and href != url
    link.click()
    page.wait_for_url(f"**{href}")
    page.wait_for_selector("body[data-ready=true]")
    expect(page.locator(".run-distributed tr[data-graph='0']")).to_contain_text("1 all-reduce")
    assert page_errors(page) == []
