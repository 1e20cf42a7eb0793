"""Fixtures every test folder shares: one headless Chromium for the whole session.

Playwright's sync API runs one driver per thread, so the browser tests (tests/browser)
and the server's CSP test (tests/server) must share this one instead of starting their own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiers  # tests/tiers.py: tests/ is on the path of every test

from kernelscope.compiler.runtime.openmp import wait_passively

wait_passively()  # as the command line and every job: before a test loads torch

CHROMIUM = os.environ.get("KERNELSCOPE_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install playwright)")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects on the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks `slow` every test tests/tiers.py's SLOW names (the one place for the tiers)."""
    root = Path(__file__).resolve().parent
    for item in items:
        path = item.path.resolve()
        if not path.is_relative_to(root):
            continue
        module = path.relative_to(root).as_posix()
        function = getattr(item, "originalname", item.name)
        if module in tiers.SLOW or f"{module}::{function}" in tiers.SLOW:
            item.add_marker(pytest.mark.slow)
