"""Results our own code computed, kept on disk by key: the measured times of a GEMM choice
(runtime/autotune.py, kind "mm") and the build reports of a graph's kernels (Triton's
stages, registers, SASS; runtime/loader.py, kind "stages").

In: the cache root, a kind, a key that names everything the result depends on (shapes,
dtypes, device name, tool versions, the compiler's source). Out: where the result lives
(`<cache>/results/<kind>_<key>.json`) and, read back, the result if its shape is right.

Unlike a wrapper or a C++ source, a result cannot be verified by its content (a time is a
measurement), so it is only as good as the process that wrote it. In the explorer the
server shares results across jobs (server/jobs/kcache.py, which imports this module: it stays
free of torch) only from the back half, the process of our own code that never ran a
snippet; a snippet's own cache is never read.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

FOLDER = "results"
KINDS = ("mm", "stages")
NAME = re.compile(r"^(mm|stages)_([0-9a-f]{20})\.json$")


def result_path(root: Path, kind: str, key: str) -> Path:
    """`root` is the cache root (runtime/cache.py cache_root)."""
    assert kind in KINDS, kind
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{kind}_{key}.json"


def read_result(path: Path) -> dict[str, Any] | None:
    """The stored result, or None (absent, unreadable, or not of its kind's shape)."""
    m = NAME.match(path.name)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if m is not None and valid(m[1], data) else None


def valid(kind: str, data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    if kind == "mm":
        return _times_ok(data)
    return all(isinstance(k, str) and isinstance(v, dict) for k, v in data.items())


def _times_ok(data: dict[str, Any]) -> bool:
    """{"ms": {choice: finite ms}, "errors": {choice: why it was dropped}}."""
    ms, errors = data.get("ms"), data.get("errors", {})
    return isinstance(ms, dict) and isinstance(errors, dict) and all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
        and math.isfinite(v) and v >= 0 for k, v in ms.items()) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in errors.items())
