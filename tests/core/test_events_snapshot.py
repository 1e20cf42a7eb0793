"""Every sample's lowering, scheduling, memory and codegen events, byte for byte against
tests/golden/events/ (generated kernel sources, wrapper, fusion decisions, memory plan;
no timings), for the C++ and the Triton backend.

A change that means to alter generated code rewrites the files with
`PYTHONPATH=$PWD python tests/core/events_snapshot.py [sample ...]` and commits the diff,
read; a refactor leaves them byte-identical. A missing file is a failure, never written.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from events_snapshot import BACKENDS, GOLDEN, SAMPLES, sample_snapshots


@pytest.mark.parametrize("sample", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_sample_events_match_snapshot(sample: Path) -> None:
    texts = sample_snapshots(sample)
    assert sorted(texts) == sorted(f"{sample.stem}_{b}" for b in BACKENDS)
    for name, text in texts.items():
        path = GOLDEN / f"{name}.json"
        assert path.exists(), f"no snapshot {path.name}: run tests/core/events_snapshot.py"
        want = path.read_text()
        if text != want:
            diff = "".join(difflib.unified_diff(want.splitlines(True), text.splitlines(True),
                                                f"golden/{name}", "now", n=2))
            pytest.fail(f"{name}: events differ from the snapshot\n{diff[:6000]}")
