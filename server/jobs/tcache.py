"""Triton's compiled kernels in the shared kernel cache, built only by the server.

In: after a GPU job, a Triton wrapper the shared cache holds (verified by its hash,
server/jobs/kcache.py) and the input specs its first launch wrote beside it (data). Out:
`triton_<key>/`, the Triton cache entries (cubin, metadata, stages, launchers) that a
fresh sandbox, which no snippet ran in, built by launching that wrapper alone on zeros
(`python -m kernelscope.compiler.runtime.triton_prebuild`). A job loading the same wrapper sees
those
entries through its per-wrapper Triton cache (compiler/codegen/triton/cache.py).

Why this is safe: nothing Triton wrote in a job is ever taken (a job's `triton/` folder
and any `triton_*` name in it are ignored). An entry in `triton_<key>` was built from
wrapper `<key>`, and only a job that loads that very wrapper (the same text: its name is
its hash) looks there; such a job runs that wrapper's code anyway. The specs only choose
which specialization gets built, and Triton keys each entry by its own hash of source and
specialization, so a lying spec builds an entry nobody asks for.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from kernelscope.compiler.devices import is_gpu

log = logging.getLogger(__name__)
ENTRY = re.compile(r"^[A-Za-z0-9_\-]{16,128}$")  # Triton's cache keys (base32 hashes)
FILE = re.compile(r"^[\w.\-]{1,160}$")
MAX_INPUTS_BYTES = 64 << 10
MAX_FILE_BYTES = 16 << 20
MAX_FILES = 256
PREBUILD_TIMEOUT_S = 240


def wants_prebuild(inputs_text: str) -> bool:
    """The first launch ran on a GPU (the interpreter keeps no cache)."""
    try:
        specs = json.loads(inputs_text)
    except ValueError:
        return False
    return isinstance(specs, list) and any(
        isinstance(s, dict) and is_gpu(str(s.get("device"))) for s in specs)


def prebuild(kcache: Any, key: str, wrapper: str, inputs: str) -> int:
    """Build wrapper `key`'s kernels in a fresh sandbox and install what Triton made as
    `triton_<key>`; returns the entries installed (0: nothing shared)."""
    target = kcache.root / f"triton_{key}"
    if target.exists() or len(inputs) > MAX_INPUTS_BYTES or not wants_prebuild(inputs):
        return 0
    python = (kcache.settings.back_command or kcache.settings.command)[0]
    files = {f"graph_{key}.py": wrapper, "inputs.json": inputs}
    with kcache.sandboxed(files) as (scratch, run):
        argv = lambda v: [python, "-m", "kernelscope.compiler.runtime.triton_prebuild",  # noqa: E731
                          f"{v}/graph_{key}.py", f"{v}/inputs.json", f"{v}/triton"]
        if not run(argv, PREBUILD_TIMEOUT_S):
            return 0
        return install(scratch / "triton", target)
    return 0


def install(built: Path, target: Path) -> int:
    """Copy a Triton cache folder the server's sandbox made into `target` (atomically):
    regular files of plain names in entry folders of Triton's key shape, each group file
    (`__grp__*.json`) rewritten to name its files where they now are."""
    if built.is_symlink() or not built.is_dir():
        return 0
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}")
    count = 0
    try:
        for entry in sorted(os.scandir(built), key=lambda e: e.name):
            if not ENTRY.match(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            names = [f.name for f in os.scandir(entry.path)
                     if FILE.match(f.name) and f.is_file(follow_symlinks=False)
                     and f.stat(follow_symlinks=False).st_size <= MAX_FILE_BYTES]
            out = tmp / entry.name
            out.mkdir(parents=True)
            for name in names:
                data = (Path(entry.path) / name).read_bytes()
                if name.startswith("__grp__") and name.endswith(".json"):
                    data = _regroup(data, set(names), target / entry.name)
                (out / name).write_bytes(data)
                os.chmod(out / name, 0o644)
                count += 1
                if count >= MAX_FILES:
                    break
            os.chmod(out, 0o755)
        if not count:
            return 0
        os.chmod(tmp, 0o755)
        os.rename(tmp, target)
        return count
    except OSError as exc:
        log.warning("kernel cache: Triton entries not installed: %s", exc)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _regroup(data: bytes, names: set[str], where: Path) -> bytes:
    """A group file's `child_paths`, pointing into `where` (only files that came along)."""
    try:
        children = json.loads(data)["child_paths"]
        assert isinstance(children, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        return b"{}"
    kept = {str(k): str(where / os.path.basename(str(p))) for k, p in children.items()
            if os.path.basename(str(p)) in names}
    return json.dumps({"child_paths": kept}).encode()
