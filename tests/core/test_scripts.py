"""scripts/setup.sh and scripts/kernelscope pick one interpreter (scripts/python.sh): the
checkout's virtualenv even when it is not activated, so README's first command works there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def checkout(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    for name in ("setup.sh", "python.sh", "kernelscope"):
        shutil.copy2(REPO / "scripts" / name, tmp_path / "scripts" / name)
    return tmp_path


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV")}
    return {**env, **extra}


def which(root: Path, env: dict[str, str]) -> str:
    out = subprocess.run(["bash", str(root / "scripts" / "setup.sh"), "--which-python"],
                         env=env, capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.strip()


def test_an_unactivated_virtualenv_in_the_checkout_is_used(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    assert which(root, clean_env()) != str(root / ".venv" / "bin" / "python")
    venv_python = root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(sys.executable)
    assert which(root, clean_env()) == str(venv_python)
    assert which(root, clean_env(PYTHON="/usr/bin/python3")) == "/usr/bin/python3"
    active = tmp_path / "active"
    (active / "bin").mkdir(parents=True)
    (active / "bin" / "python").symlink_to(sys.executable)
    assert which(root, clean_env(VIRTUAL_ENV=str(active))) == str(active / "bin" / "python")


def test_the_kernelscope_script_runs_the_compiler_with_that_interpreter(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    venv_python = root / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(sys.executable)
    out = subprocess.run([str(root / "scripts" / "kernelscope"), "compile", "--help"],
                         env=clean_env(PYTHONPATH=str(REPO)), capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "kernelscope compile" in out.stdout
