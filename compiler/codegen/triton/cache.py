"""Triton's own cache around one graph's first launch, shared across jobs per wrapper.

The server's shared kernel cache (server/jobs/kcache.py, server/jobs/tcache.py) keeps, for each
Triton wrapper it verified, a folder `triton_<key>` of Triton cache entries (cubins,
their metadata and stages, the launchers) that the server built itself from that wrapper
alone, in a sandbox no snippet ran in. A job sees those folders read-only, linked into its
cache folder. For its first launch a graph's kernels compile with Triton pointed at a
folder of this job's own for the wrapper, `triton/<key>/`, holding a link to each shared
entry of `triton_<key>`: Triton finds those (its keys are its own hashes of the kernel
source and specialization) and compiles only what is missing, into that folder. An entry
built from another wrapper is never in reach.

Beside the wrapper the graph leaves `graph_<key>.inputs.json`: the shapes, strides and
dtypes of its inputs, which the server's rebuild launches the wrapper with (on zeros).

In: the wrapper's path in the cache, its inputs as specs. Out: TRITON_CACHE_DIR for the
duration of the `with` block.
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
    """Triton's cache is `<cache>/triton/<key>/` inside the block, seeded with links to
    the shared entries built from this wrapper; `inputs` (None: not describable) are
    written beside the wrapper for the server's rebuild."""
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
