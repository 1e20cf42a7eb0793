"""The web UI reads events through the types generated from the schema: webui/tsconfig.json
type-checks webui/js (plain JavaScript, JSDoc annotations where events arrive and are read)
against webui/types/events.d.ts with the extension's TypeScript. A field the UI reads that
the schema does not have, or a schema field renamed under a reader, fails the check.

Needs the extension's node_modules (`cd extension && npm ci`; CI installs them before
pytest): skipped without them, failed in CI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TSC = ROOT / "extension" / "node_modules" / ".bin" / "tsc"
WEBUI = ROOT / "webui"


def _tsc(project: Path) -> subprocess.CompletedProcess[str]:
    if not TSC.exists() or shutil.which("node") is None:
        message = "no TypeScript: cd extension && npm ci"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return subprocess.run([str(TSC), "-p", "."], cwd=project, capture_output=True, text=True,
                          timeout=300)


def _errors(out: str) -> set[tuple[str, str]]:
    """(file, missing property) for each error tsc reports."""
    found = set()
    for line in out.splitlines():
        if ": error TS" in line:
            m = re.search(r"Property '(\w+)' does not exist", line)
            found.add((line.split("(", 1)[0], m.group(1) if m else line))
    return found


# (file, text the web UI has, the same read of a field the schema does not have)
PLANTS = [
    ("js/main.js", "event.data.graph_breaks", "event.data.graph_break"),  # where events arrive
    ("js/trace.js", 'trace.data("capture")?.compiles ?? []).map((c) => [c.compile_id',
     'trace.data("capture")?.compiles ?? []).map((c) => [c.compileid'),
    ("js/provenance.js", "origins: b.origins", "origins: b.origin_names"),
    ("js/panes/fusion.js", "(g.decisions", "(g.decision_list"),
    ("js/panes/timings.js", "run.ok ?", "run.passed ?"),
    ("js/panes/status.js", "event.data.ok", "event.data.okay"),
    ("js/panes/code.js", "kernel.line_map", "kernel.linemap"),
]
# a field renamed in the schema (as the generator would write it), under a reader
RENAMED = ("types/events.d.ts", "  peak_bytes: number;", "  peak_bytes_reused: number;")


def test_a_read_off_the_schema_fails_the_check(tmp_path: Path) -> None:
    """On a copy of webui/ with the plants below, tsc reports each of them and nothing
    else: so the tree itself checks clean (as `npm run typecheck` in CI also says), and
    the event-reading parts are on the types."""
    copy = tmp_path / "webui"
    shutil.copytree(WEBUI, copy, ignore=shutil.ignore_patterns("vendor-src", "*.min.js",
                                                              "codemirror.js"))
    for path, have, plant in [*PLANTS, RENAMED]:
        text = (copy / path).read_text()
        assert have in text, (path, have)
        (copy / path).write_text(text.replace(have, plant, 1))
    proc = _tsc(copy)
    assert proc.returncode != 0
    expected = {(path, plant.split(".")[-1].split(" ")[0]) for path, _, plant in PLANTS}
    assert _errors(proc.stdout) == expected | {("js/panes/memory.js", "peak_bytes")}, \
        proc.stdout
