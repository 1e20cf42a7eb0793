"""mypy over Kernelscope's packages, named as they are imported: `kernelscope.compiler.*`
from compiler/, `kernelscope.server.*` from server/ (pyproject.toml's package-dir).

`mypy -p kernelscope.compiler` finds a package by walking folders, and in a checkout the
namespace is a mapping, not a folder tree (no links: kernelscope/__init__.py extends its
path at import, which mypy does not run). This hands mypy every file with its module name,
with the options of pyproject.toml's [tool.mypy]. CI runs it; so can anyone:

    python scripts/typecheck.py                         # kernelscope.compiler and .server
    python scripts/typecheck.py kernelscope.compiler    # one of them
"""

from __future__ import annotations

import sys
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"kernelscope": ROOT / "kernelscope", "kernelscope.compiler": ROOT / "compiler",
           "kernelscope.server": ROOT / "server"}
DEFAULT = ("kernelscope.compiler", "kernelscope.server")


def sources(packages: list[str]) -> list[BuildSource]:
    """Each file of the packages with its module name (and the namespace's own __init__)."""
    out = [BuildSource(str(FOLDERS["kernelscope"] / "__init__.py"), "kernelscope")]
    for package in packages:
        base = FOLDERS[package]
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            module = ".".join((package, *parts))
            out.append(BuildSource(str(path), module))
    return out


def main(argv: list[str]) -> int:
    packages = argv or list(DEFAULT)
    unknown = [p for p in packages if p not in FOLDERS or p == "kernelscope"]
    if unknown:
        print(f"typecheck: unknown package {', '.join(unknown)} (one of {', '.join(DEFAULT)})",
              file=sys.stderr)
        return 2
    _, options = process_options(["--config-file", str(ROOT / "pyproject.toml"),
                                  str(FOLDERS["kernelscope"] / "__init__.py")])
    files = sources(packages)
    try:
        result = build.build(files, options)
    except CompileError as e:
        print("\n".join(e.messages))
        return 2
    for line in result.errors:
        print(line)
    if result.errors:
        print(f"Found {len(result.errors)} errors ({', '.join(packages)})")
        return 1
    print(f"Success: no issues found in {', '.join(packages)} ({len(files)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
