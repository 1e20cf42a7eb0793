"""Kernelscope's one import namespace: `kernelscope.compiler` (the compiler, a library) and
`kernelscope.server` (the explorer's web tier and job workers).

The folders stay at the checkout's top (`compiler/`, `server/`); pyproject.toml maps them
into this namespace (setuptools' package-dir), so an installed wheel holds one real tree,
kernelscope/compiler and kernelscope/server. Every import, console script, entry point and
worker command names `kernelscope.*`, so a user project with its own `compiler` or `server`
package can never shadow Kernelscope's (tests/core/test_namespace.py).
"""

from pathlib import Path

# Run from a checkout (not installed, or installed editable from another checkout), the
# folders sit beside this one: the checkout's top is where `kernelscope.compiler` and
# `kernelscope.server` are found, as the install's mapping finds them.
_HERE = Path(__file__).resolve().parent
if not (_HERE / "compiler").is_dir() and (_HERE.parent / "compiler" / "__init__.py").is_file():
    __path__.append(str(_HERE.parent))
