"""Kernelscope installs the way Python users install: pyproject.toml declares what each use
needs, the `kernelscope` namespace is one real package tree (compiler/ and server/ mapped by
setuptools' package-dir, no links), and a wheel installed into a clean virtualenv serves
and compiles.

The fast checks read pyproject.toml and the source; the wheel is built and installed in the
slow tier (tests/tiers.py).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
# What the explorer needs to start (`kernelscope serve`): in the base install, never an extra.
SERVE_NEEDS = {"flask", "werkzeug", "gunicorn", "gevent", "pygments", "torch", "sympy"}
# An import name that is not its distribution's name.
DISTRIBUTION = {"yaml": "pyyaml"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _declared() -> dict[str, str]:
    """Distribution name -> where pyproject.toml declares it ("base" or the extra's name)."""
    out = {_name(r): "base" for r in PYPROJECT["project"]["dependencies"]}
    for extra, reqs in PYPROJECT["project"]["optional-dependencies"].items():
        for r in reqs:
            out.setdefault(_name(r), extra)
    return out


def _third_party_imports(folders: list[Path]) -> dict[str, str]:
    """Top-level third-party module -> one file importing it (any level, lazy included)."""
    found: dict[str, str] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top != "kernelscope":
                        found.setdefault(top, str(path.relative_to(REPO)))
    return found


def undeclared(imports: dict[str, str], declared: dict[str, str]) -> list[str]:
    return [f"{where} imports {module}, which pyproject.toml does not declare"
            for module, where in sorted(imports.items())
            if DISTRIBUTION.get(module, module).replace("_", "-") not in declared]


def test_what_the_compiler_and_server_import_is_declared() -> None:
    """`pip install kernelscope` then `kernelscope serve` failed for want of gevent, which
    only scripts/setup.sh installed: every third-party import of compiler/, server/ and
    kernelscope/ is a declared dependency, and what serving needs is in the base install."""
    declared = _declared()
    assert undeclared(_third_party_imports([REPO / "compiler", REPO / "server",
                                            REPO / "kernelscope"]), declared) == []
    assert {d: declared.get(d) for d in SERVE_NEEDS} == {d: "base" for d in SERVE_NEEDS}
    assert {declared.get(d) for d in ("rq", "redis", "psycopg")} == {"queue"}


def test_the_declaration_check_sees_a_missing_dependency() -> None:
    declared = {k: v for k, v in _declared().items() if k != "gevent"}
    found = undeclared({"gevent": "server/web/gworker.py", "flask": "x.py"}, declared)
    assert found == ["server/web/gworker.py imports gevent, which pyproject.toml does not "
                     "declare"]


def test_the_tests_need_only_the_test_and_queue_extras() -> None:
    """What tests/ imports is declared: in the base install, the [test] extra, or [queue]
    (CI installs `.[test,queue]` through scripts/setup.sh)."""
    declared = _declared()
    imports = _third_party_imports([REPO / "tests"])
    local = {p.stem for p in (REPO / "tests").rglob("*.py")} | {
        p.name for p in (REPO / "tests").rglob("*") if p.is_dir()} | {
        "tests", "benchmarks", "typecheck"}  # the checkout's own folders and scripts
    # torchvision: the GPU host's full-size training script (tests/models/train_h200.py),
    # which pytest never collects.
    elsewhere = {"torchvision"}
    assert undeclared({m: w for m, w in imports.items() if m not in local | elsewhere},
                      declared) == []


def test_setup_installs_through_the_declarations() -> None:
    """scripts/setup.sh keeps no package list of its own: it installs the project with its
    extras, and scripts/constraints.txt pins every declared package but torch."""
    setup = (REPO / "scripts" / "setup.sh").read_text()
    assert 'pip_install -e ".[$extras]" -c' in setup
    assert "PKGS=(" not in setup
    pins = {_name(line) for line in (REPO / "scripts" / "constraints.txt").read_text()
            .splitlines() if line.strip() and not line.startswith("#")}
    assert set(_declared()) - {"torch"} <= pins, set(_declared()) - {"torch"} - pins
    assert "torch" not in pins


def _package_folders() -> set[str]:
    out = {"kernelscope"}
    for top in ("compiler", "server"):
        for init in (REPO / top).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / top).parts
            out.add(".".join(("kernelscope", top, *rel)))
    return out


def test_every_package_folder_is_in_the_wheel() -> None:
    """pyproject.toml lists the packages (package-dir maps them): a new folder under
    compiler/ or server/ must be added there, or the wheel goes without it."""
    listed = set(SETUPTOOLS["packages"])
    assert _package_folders() <= listed, sorted(_package_folders() - listed)
    assert listed - _package_folders() == {"kernelscope.webui", "kernelscope.samples"}
    mapping = SETUPTOOLS["package-dir"]
    assert mapping["kernelscope.compiler"] == "compiler"
    assert mapping["kernelscope.server"] == "server"


def test_the_package_tree_has_no_symbolic_links() -> None:
    links = [str(p.relative_to(REPO)) for top in ("kernelscope", "compiler", "server")
             for p in [REPO / top, *(REPO / top).rglob("*")] if p.is_symlink()]
    assert links == []


def test_the_type_check_names_each_file_as_it_is_imported() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import typecheck
    finally:
        sys.path.remove(str(REPO / "scripts"))
    names = {Path(s.path or "").relative_to(REPO).as_posix(): s.module
             for s in typecheck.sources(["kernelscope.compiler", "kernelscope.server"])}
    assert names["compiler/codegen/cpp/kernel.py"] == "kernelscope.compiler.codegen.cpp.kernel"
    assert names["server/jobs/__init__.py"] == "kernelscope.server.jobs"
    assert names["kernelscope/__init__.py"] == "kernelscope"
    assert len(names) == len(list((REPO / "compiler").rglob("*.py"))) + len(
        list((REPO / "server").rglob("*.py"))) + 1


# -- the wheel, in a clean virtualenv (slow tier) -----------------------------------------
def _copy_sources(dst: Path) -> Path:
    """What the wheel is built from, copied (the build writes build/ and *.egg-info)."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, dst / name)
    for name in ("kernelscope", "compiler", "server", "webui", "samples"):
        shutil.copytree(REPO / name, dst / name, ignore=shutil.ignore_patterns(
            "__pycache__", "node_modules", "vendor-src"))
    return dst


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _health(port: int, proc: subprocess.Popen[Any], deadline: float) -> bytes:
    while time.monotonic() < deadline:
        assert proc.poll() is None, "kernelscope serve exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5) as r:
                return bytes(r.read())
        except OSError:
            time.sleep(0.5)
    raise AssertionError("no answer from /api/health in time")


def test_a_wheel_installs_and_serves_in_a_clean_virtualenv(tmp_path: Path) -> None:
    """The wheel, installed with pip into a virtualenv that has torch (the host's, through
    --system-site-packages; nothing is downloaded), runs `kernelscope serve` (it answers
    /api/health, and serves the web UI and the samples from the wheel) and `kernelscope
    compile`, importing the installed package, not the checkout."""
    src, wheels, venv = (_copy_sources(_mkdir(tmp_path / "src")), tmp_path / "wheels",
                         tmp_path / "venv")
    run = {"capture_output": True, "text": True, "timeout": 300, "cwd": tmp_path}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-q", "-w", str(wheels), str(src)],
                           env=env, **run)  # type: ignore[call-overload]
    assert built.returncode == 0, built.stderr[-3000:]
    # --without-pip: the host's pip (and setuptools) are used, not a venv's older copies.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True, env=env, **run)  # type: ignore[call-overload]
    python = venv / "bin" / "python"
    wheel = next(wheels.glob("kernelscope-*.whl"))
    installed = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "-q",
                                str(wheel)], env=env, **run)  # type: ignore[call-overload]
    assert installed.returncode == 0, installed.stderr[-3000:]
    where = subprocess.run([str(python), "-c", "import kernelscope.compiler as c, "
                            "kernelscope.server as s; print(c.__file__); print(s.__file__)"],
                           env=env, **run)  # type: ignore[call-overload]
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert where.stdout.split() == [str(site / "site-packages" / "kernelscope" / p /
                                        "__init__.py") for p in ("compiler", "server")]

    compiled = subprocess.run([str(venv / "bin" / "kernelscope"), "compile",
                               str(REPO / "samples" / "add_relu.py"), "--stage", "codegen"],
                              env=env, **run)  # type: ignore[call-overload]
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    assert "cpp_poi_fused_add_relu_0" in compiled.stdout

    port = _free_port()
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen([str(venv / "bin" / "kernelscope"), "serve", "--port",
                                 str(port), "--pool", "0"], cwd=tmp_path, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        health = _health(port, proc, time.monotonic() + 120)
        assert b'"ok":true' in health.replace(b" ", b""), health
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as r:
            assert b"<html" in r.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/samples", timeout=10) as r:
            assert b'"add_relu"' in r.read()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert "gevent" in (tmp_path / "serve.log").read_text()  # the production server ran


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
