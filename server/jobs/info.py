"""Facts about the host for `/api/health` and the samples menu for `/api/samples`.

Nothing here imports torch: versions come from package metadata and GPUs from
`nvidia-smi` (or the driver's /proc entries), so the server process stays small and the
snippets' world (torch, CUDA) lives only in the workers.
"""

from __future__ import annotations

import ast
import glob
import importlib.metadata
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kernelscope.compiler.devices import CPU, CUDA

PACKAGES = ("torch", "triton", "flask", "pygments", "kernelscope")


def versions(repo_dir: Path | None = None) -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    if out["kernelscope"] is None and repo_dir is not None:  # a checkout, not installed
        init = repo_dir / "compiler" / "versions.py"
        found = re.search(r'__version__ = "([^"]+)"', init.read_text()) if init.exists() else None
        out["kernelscope"] = found.group(1) if found else None
    return out


def gpus() -> list[dict[str, Any]]:
    """The host's NVIDIA GPUs: name and memory, as the driver reports them."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            done = subprocess.run(
                [smi, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                check=False,
                capture_output=True,
                text=True,
                timeout=10,
            )
            rows = [r.split(",") for r in done.stdout.splitlines() if r.strip()]
            if done.returncode == 0:
                return [{"name": r[0].strip(), "memory_mb": _int(r[-1])} for r in rows]
        except (OSError, subprocess.SubprocessError):
            pass
    found = []
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        fields = dict(
            line.split(":", 1) for line in Path(info).read_text().splitlines() if ":" in line
        )
        found.append({"name": fields.get("Model", "NVIDIA GPU").strip(), "memory_mb": None})
    return found


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def devices() -> dict[str, Any]:
    found = gpus()
    return {
        CPU: {"name": platform.processor() or platform.machine()},
        CUDA: bool(found),
        "gpus": found,
        "gpu": found[0]["name"] if found else None,
    }


def sample_title(code: str, name: str) -> str:
    """The first line of the module docstring, else of the first comment, else the name."""
    try:
        doc = ast.get_docstring(ast.parse(code))
    except SyntaxError:
        doc = None
    if doc and doc.strip():
        return doc.strip().splitlines()[0].strip()
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") and not stripped.startswith("#!"):
            text = stripped.lstrip("#").strip()
            if text:
                return text
        elif stripped:
            break
    return name.replace("_", " ")


def list_samples(folder: Path) -> list[dict[str, str]]:
    """samples/*.py, sorted by name: {name, title, code}."""
    out = []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("_"):
            continue
        code = path.read_text(encoding="utf-8", errors="replace")
        out.append({"name": path.stem, "title": sample_title(code, path.stem), "code": code})
    return out
