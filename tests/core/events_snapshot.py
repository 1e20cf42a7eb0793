"""Every sample's back-half events (lowering, scheduling, memory, codegen) as text: the
snapshot tests/core/test_events_snapshot.py compares byte for byte with
tests/golden/events/, so a refactor that changes a generated kernel, the wrapper, a
fusion decision or the memory plan is seen.

Each sample is captured once (the front half, on the CPU) and its bundle lowered for the
C++ and the Triton backend; stage timings and the compile/run/profile stages (timings,
build paths) are left out. `python tests/core/events_snapshot.py` (re)writes the files.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "samples").glob("*.py"))
GOLDEN = REPO / "tests" / "golden" / "events"
BACKENDS = ("cpp", "triton")
SNAPSHOT_STAGES = ("lowering", "scheduling", "memory", "codegen")


def _back_events(bundle: Path, options: Any, code: str) -> dict[str, Any]:
    from kernelscope.compiler import pipeline
    from kernelscope.compiler.capture.bundle import read_bundle
    from kernelscope.compiler.events import types as ev

    # The back half quotes the submitted code, never the bundle's (as run_back(code=...)).
    run = pipeline._BackRun(read_bundle(bundle), options, code.splitlines())
    pipeline._rebuild(run)
    pipeline._make_works(run)
    out: dict[str, Any] = {}
    for name, fn in pipeline.BACK_STAGES:
        if name not in SNAPSHOT_STAGES:
            break
        with torch.no_grad():
            out[name] = ev.to_json(fn(run))
    return out


def sample_snapshots(sample: Path) -> dict[str, str]:
    """`<sample>_<backend>` -> the JSON text of that sample's events on that backend."""
    from kernelscope.compiler.options import CompileOptions
    from kernelscope.compiler.pipeline import run_front

    texts: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="ks-snapshot-") as tmp:
        bundle = Path(tmp) / "capture.ksb"
        front = CompileOptions(device="cpu", backend="cpp", profile=False, cache_dir=tmp)
        code = sample.read_text()
        events = list(run_front(code, front, bundle, str(sample)))
        errors = [e.data for e in events if e.stage == "error"]
        assert not errors, errors
        for backend in BACKENDS:
            options = CompileOptions(device="cpu", backend=backend, profile=False,
                                     cache_dir=tmp)
            text = json.dumps(_back_events(bundle, options, code), indent=1, sort_keys=True)
            text = text.replace(tmp, "<cache>").replace(str(REPO), "<repo>")
            # The built library's name hashes its source, which names this machine's
            # torch include directory: the kernels in it are compared, not that path.
            text = re.sub(r"kernels_[0-9a-f]{20}", "kernels_<key>", text)
            texts[f"{sample.stem}_{backend}"] = text + "\n"
    return texts


def main() -> None:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    for sample in SAMPLES:
        if only and sample.stem not in only:
            continue
        for name, text in sample_snapshots(sample).items():
            (GOLDEN / f"{name}.json").write_text(text)
            print(name, len(text))


if __name__ == "__main__":
    main()
