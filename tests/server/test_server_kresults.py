"""Results shared across jobs (server/jobs/kcache.py): a GEMM choice's measured times and a
kernel's build report are taken only from a back half's cache under bubblewrap, only in
their kind's shape, and a later job reads them (compiler/runtime/results.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from server_support import (
    REAL_BACK,
    REAL_WORKER,
    AppFactory,
    add_relu_code,
    compile_events,
    needs_real_cli,
    state,
    wait_until,
)

from kernelscope.server.jobs.kcache import KernelCache, job_cache

KEY = "0123456789abcdef0123"
TIMES = {"ms": {"extern": 0.04, "64x64x32_g8_s3_w4": 0.03}, "errors": {}}


def _kcache(root: Path, mode: str = "bubblewrap") -> KernelCache:
    settings = SimpleNamespace(isolation=SimpleNamespace(mode=mode, uid=None, gid=None,
                                                         bubblewrap=mode == "bubblewrap"))
    return KernelCache(root, settings)


def _job(tmp_path: Path, name: str, files: dict[str, Any]) -> Path:
    scratch = tmp_path / name
    folder = job_cache(scratch) / "results"
    folder.mkdir(parents=True)
    for file, data in files.items():
        (folder / file).write_text(data if isinstance(data, str) else json.dumps(data))
    return scratch


def test_a_back_half_result_reaches_a_later_job(tmp_path: Path) -> None:
    kcache = _kcache(tmp_path / "shared")
    back = _job(tmp_path, "back", {f"mm_{KEY}.json": TIMES})
    assert kcache.promote(back, results=True).results == 1
    later = tmp_path / "later"
    kcache.link_into(later)
    linked = job_cache(later) / "results" / f"mm_{KEY}.json"
    assert linked.is_symlink() and json.loads(linked.read_text()) == TIMES
    # ...and the compiler's reader takes it as measured times.
    from kernelscope.compiler.runtime.results import read_result

    assert read_result(linked) == TIMES


@pytest.mark.parametrize("mode", ["uid", "none"])
def test_no_result_is_shared_without_bubblewrap(tmp_path: Path, mode: str) -> None:
    """Without bubblewrap the front half runs as the back half's uid and could write
    into the back half's folder."""
    kcache = _kcache(tmp_path / "shared", mode)
    back = _job(tmp_path, "back", {f"mm_{KEY}.json": TIMES})
    assert kcache.promote(back, results=True).results == 0
    assert not list(kcache.results.iterdir())


def test_a_snippet_written_result_is_not_taken(tmp_path: Path) -> None:
    """A one-process job (the snippet shares the compiler's process), or a front half:
    its wrappers may be verified, its results never read."""
    kcache = _kcache(tmp_path / "shared")
    forged = {"ms": {"extern": 99.0, "64x64x32_g8_s3_w4": 0.0001}, "errors": {}}
    front = _job(tmp_path, "front", {f"mm_{KEY}.json": forged})
    assert kcache.promote(front).results == 0
    assert not list(kcache.results.iterdir())
    kcache.link_into(tmp_path / "later")
    assert not (job_cache(tmp_path / "later") / "results" / f"mm_{KEY}.json").exists()


def test_malformed_results_and_links_are_refused(tmp_path: Path) -> None:
    kcache = _kcache(tmp_path / "shared")
    bad = {
        f"mm_{'1' * 20}.json": {"ms": {"extern": "fast"}},
        f"mm_{'2' * 20}.json": {"ms": {"extern": float("nan")}},
        f"mm_{'3' * 20}.json": "not json",
        f"stages_{'4' * 20}.json": ["a list"],
        "mm_short.json": TIMES,
        f"other_{KEY}.json": TIMES,
    }
    back = _job(tmp_path, "back", bad)
    os.symlink("/etc/passwd", job_cache(back) / "results" / f"stages_{'5' * 20}.json")
    promoted = kcache.promote(back, results=True)
    assert promoted.results == 0 and promoted.rejected == 4
    assert not list(kcache.results.iterdir())


@needs_real_cli
def test_a_repeated_job_reports_every_kernel_as_a_cache_hit(make_app: AppFactory) -> None:
    """Through the real server: job 1's back half keeps each kernel's report, the server
    takes it, and job 2 (another process, another cache folder) builds and reports
    nothing: every kernel of its `compile` event is a cache hit."""
    app = make_app(WORKER_CMD=REAL_WORKER, BACK_CMD=REAL_BACK, JOB_TIMEOUT_S=240,
                   WARM_IMPORTS=["torch", "kernelscope.compiler.pipeline"], MAX_JOBS=1)
    kcache = state(app).jobs.kcache
    if kcache is None or not kcache.results_shared:
        pytest.skip("results are not shared here (no bubblewrap)")
    client = app.test_client()
    compiles = []
    for _ in range(2):
        events = compile_events(client, add_relu_code(), device="cpu", backend="cpp")
        assert wait_until(lambda: state(app).jobs.stats()["running"] == 0, 60)
        stages = {e["stage"]: e["data"] for e in events}
        assert stages["run"]["ok"] is True, events[-2:]
        compiles.append(stages["compile"]["graphs"])
    assert kcache.stats["results"] >= 1, kcache.stats
    assert not any(k["cache_hit"] for g in compiles[0] for k in g["kernels"])
    kernels = [k for g in compiles[1] for k in g["kernels"]]
    assert kernels and all(k["cache_hit"] for k in kernels)
    assert all(g["cache_hit"] and g["build_ms"] == 0 for g in compiles[1])
