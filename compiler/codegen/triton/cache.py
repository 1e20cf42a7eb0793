"""Triton's own cache around one graph's first launch, shared across jobs per wrapper.

The server keeps, per verified wrapper, a folder `triton_<key>` of Triton cache entries it
built from that wrapper alone (server/jobs/tcache.py). A job's first launch compiles into
its own `triton/<key>/`, seeded with links to those entries, so Triton builds only what
is missing and never reaches another wrapper's entries. `graph_<key>.inputs.json`
describes the inputs the server's rebuild launches the wrapper with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CACHE_ENV = "TRITON_CACHE_DIR"


def wrapper_key(wrapper: Path) -> str:
    return wrapper.stem.removeprefix("graph_")


def inputs_path(wrapper: Path) -> Path:
    return wrapper.with_name(f"graph_{wrapper_key(wrapper)}.inputs.json")


@contextmanager
def graph_triton_cache(wrapper: Path, inputs: list[dict[str, Any]] | None) -> Iterator[Path]:
    """TRITON_CACHE_DIR is `<cache>/triton/<key>/` inside the block; `inputs` (None: not
    describable) are written beside the wrapper for the server's rebuild."""
    key = wrapper_key(wrapper)
    local = wrapper.parent / "triton" / key
    local.mkdir(parents=True, exist_ok=True)
    shared = wrapper.parent / f"triton_{key}"
    if shared.is_dir():
        for entry in os.scandir(shared):
            link = local / entry.name
            if entry.is_dir() and not os.path.lexists(link):
                os.symlink(entry.path, link)
    if inputs is not None and not inputs_path(wrapper).exists():
        tmp = inputs_path(wrapper).with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(inputs))
        os.replace(tmp, inputs_path(wrapper))
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(local)
    try:
        yield local
    finally:
        if before is None:
            os.environ.pop(CACHE_ENV, None)
        else:
            os.environ[CACHE_ENV] = before
