"""Kernelscope's import names live under one `kernelscope` namespace, so a user's own
`compiler` or `server` package cannot shadow them (issue 18 item 8).

Each test starts Python as the VS Code extension does (`python -P -m kernelscope.server`,
the user's workspace as the working directory) in a folder holding decoy `compiler/`,
`server/` and `kernelscope.py` packages that fail loudly on import.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DECOY = "raise SystemExit('the user workspace shadowed Kernelscope: ' + __name__)\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    for name in ("compiler", "server"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(DECOY)
        (tmp_path / name / "__main__.py").write_text(DECOY)
    return tmp_path


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("module", ["kernelscope.server", "kernelscope.compiler"])
def test_the_users_compiler_and_server_packages_cannot_shadow_ours(
    workspace: Path, module: str
) -> None:
    proc = _run(["-P", "-m", module, "--help"], workspace)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "shadowed" not in proc.stdout + proc.stderr


def test_the_old_top_level_names_are_not_ours(workspace: Path) -> None:
    """Nothing of Kernelscope imports a top-level `compiler` or `server`: with the decoys on
    the path, importing the whole package still works, and no module of that name loads."""
    probe = ("import sys; sys.path.insert(0, '.'); import kernelscope.compiler.pipeline, "
             "kernelscope.server.cli; print(sorted(m for m in sys.modules "
             "if m.split('.')[0] in ('compiler', 'server')))")
    proc = _run(["-P", "-c", probe], workspace)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_the_package_points_at_the_top_level_folders() -> None:
    import kernelscope.compiler
    import kernelscope.server

    assert Path(kernelscope.compiler.__file__).resolve().parent == REPO / "compiler"
    assert Path(kernelscope.server.__file__).resolve().parent == REPO / "server"
