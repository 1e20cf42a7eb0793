"""Runs the web UI's JavaScript unit tests (tests/browser/js/*.test.mjs) with Node's test
runner: the provenance index and selections, which need no browser."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_javascript_units() -> None:
    files = sorted(str(p) for p in (HERE / "js").glob("*.test.mjs"))
    result = subprocess.run(
        ["node", "--test", *files], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
