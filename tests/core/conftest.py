"""Fixtures for the compiler tests: a private compile cache for the session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kernelscope-cache")
    os.environ["KERNELSCOPE_CACHE"] = str(path)
    return path
