"""The backend is an object chosen once per graph: outside the backend modules no code
compares backend names, "auto" is resolved in one place (codegen/targets.py), and nothing
in the compiler switches an emulator on through the environment behind the caller's back.

The first two read the source as text, so they fail on a new `== "triton"` anywhere in
compiler/, server/, webui/, extension/ or benchmarks/; each has a self-test showing that
its pattern sees the kinds of comparison it is meant to find.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from kernelscope.compiler.codegen import targets

REPO = Path(__file__).resolve().parents[2]
SCANNED = ("compiler", "server", "webui/js", "extension/src", "benchmarks")
SUFFIXES = {".py", ".js", ".mjs", ".ts", ".html"}
# Where backend names may be compared: the backends themselves and their table.
BACKEND_MODULES = {f"compiler/codegen/{m}.py" for m in
                   ("backend", "backends", "targets", "triton", "cpp")}

NAMES = "|".join(re.escape(n) for n in targets.names())
_Q = r"""["'`]"""
# `x == "triton"`, `"cpp" !== x`, `x in ("auto", "cpp")`, `/^(cpp|triton)_/`, a name
# picked by a condition (`c ? "triton" : "cpp"`, `"cpp" if c else ...`), and "auto"
# compared on a line about the backend (other settings have an "auto" of their own).
NAME_COMPARISON = re.compile(
    rf"""(?:[=!]==?\s*{_Q}(?:{NAMES}){_Q})|(?:{_Q}(?:{NAMES}){_Q}\s*[=!]==?)"""
    rf"""|(?:\bin\s*[(\[{{][^)\]}}]*{_Q}(?:{NAMES}){_Q})"""
    rf"""|(?:[(|](?:{NAMES})[|)])"""
    rf"""|(?:\?\s*{_Q}(?:{NAMES}){_Q}\s*:)|(?:{_Q}(?:{NAMES}){_Q}\s+if\b)""")
AUTO_COMPARISON = re.compile(
    rf"""(?:[=!]==?\s*{_Q}auto{_Q})|(?:{_Q}auto{_Q}\s*[=!]==?)|(?:\bin\s*[(\[{{][^)\]}}]*{_Q}auto{_Q})""")


def _findings(path: str, text: str) -> list[str]:
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if path.endswith(".py") else line
        if "language" in code:  # a highlighting language ("cpp" is one), not a backend
            continue
        code = re.sub(r"\bfor\s+[\w, ()]+?\s+in\b", "for ... over", code)  # a loop, not a test
        if NAME_COMPARISON.search(code) or (
                "backend" in code.lower() and AUTO_COMPARISON.search(code)):
            out.append(f"{path}:{i}: {line.strip()}")
    return out


def _scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for p in sorted((REPO / top).rglob("*")):
            if p.suffix in SUFFIXES and p.is_file() and "vendor" not in p.parts \
                    and "node_modules" not in p.parts:
                files.append(p)
    return files


def test_the_patterns_see_backend_name_comparisons() -> None:
    seen = [
        'if args.backend == "triton" and device == "cpu":',
        "return options.get('backend') != 'cpp'",
        '$("opt-backend").value = dev === "cuda" ? "triton" : "cpp";',
        "if (backend === `triton`) {",
        'if requested in ("auto", "cpp"):',
        'const core = name.replace(/^(cpp|triton|extern)_/, "");',
        'if options.backend == "auto":',
        'backend = "triton" if device == "cuda" else "cpp"',
    ]
    for line in seen:
        assert _findings("x.py", line), line
    unseen = [
        'if preference in ("auto", "bubblewrap") and bwrap:',  # not the backend's auto
        'LEXERS = {"triton": PythonLexer}',
        'x = "cpp_poi_fused_add_0"',
        'if target.name == requested:',
        'const ext = code.language === "cpp" ? "cpp" : "py";',
        'for key in ("wrappers", "libraries", "triton", "rejected"):',
    ]
    for line in unseen:
        assert not _findings("x.py", line), line


def test_no_code_outside_the_backend_modules_compares_backend_names() -> None:
    files = _scanned_files()
    assert len(files) > 50, "the scan found too few files: is the layout different?"
    found = []
    for p in files:
        rel = p.relative_to(REPO).as_posix()
        if rel not in BACKEND_MODULES:
            found += _findings(rel, p.read_text(errors="replace"))
    assert not found, "backend names compared outside the backend modules:\n" + "\n".join(found)


def test_auto_is_resolved_only_by_the_target_table() -> None:
    hits = []
    for p in _scanned_files():
        rel = p.relative_to(REPO).as_posix()
        if rel == "compiler/codegen/targets.py":
            continue
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0] if rel.endswith(".py") else line
            if AUTO_COMPARISON.search(code) and "backend" in code.lower():
                hits.append(f"{rel}:{i}")
    assert not hits
    assert targets.resolve("auto", "cpu").name == "cpp"
    assert targets.resolve("auto", "cuda").name == "triton"


ENV_WRITE = re.compile(r"os\.environ\[[^\]]+\]\s*=|os\.environ\.(?:setdefault|update|pop)\(|"
                       r"os\.putenv\(")
# Commands that set their own process's environment at start-up, from their arguments.
COMMANDS = {"compiler/cli.py", "compiler/runtime/triton_prebuild.py"}


def _env_writes(source: str) -> list[tuple[int, bool]]:
    """(line, scoped) of each write to os.environ: scoped when the function it is in puts
    the environment back in a `finally:` (a patch inside a `with`/`try` that restores)."""
    tree = ast.parse(source)
    lines = source.splitlines()
    writes = [i for i, line in enumerate(lines, 1) if ENV_WRITE.search(line.split("#", 1)[0])]
    out = []
    for line in writes:
        scoped = False
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.lineno <= line <= (fn.end_lineno or 0):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Try) and node.finalbody and any(
                            ENV_WRITE.search(ast.unparse(n)) for n in node.finalbody):
                        scoped = True
        out.append((line, scoped))
    return out


def test_the_compiler_writes_the_environment_only_at_start_up_or_scoped() -> None:
    unscoped = []
    for p in sorted((REPO / "compiler").rglob("*.py")):
        rel = p.relative_to(REPO).as_posix()
        if rel in COMMANDS:
            continue
        unscoped += [f"{rel}:{n}" for n, scoped in _env_writes(p.read_text()) if not scoped]
    assert not unscoped, unscoped
    # The check sees a bare write (what the Triton backend's build once did) and a scoped one.
    bare = "import os\ndef build():\n    os.environ['TRITON_INTERPRET'] = '1'\n"
    assert _env_writes(bare) == [(3, False)]
    scoped = ("import os\ndef f():\n    old = os.environ.get('K')\n    os.environ['K'] = '1'\n"
              "    try:\n        yield\n    finally:\n        os.environ.pop('K', None)\n")
    assert _env_writes(scoped) == [(4, True), (8, True)]


def test_triton_on_the_cpu_without_the_interpreter_is_refused_and_leaves_the_env_alone(
) -> None:
    """Regression: the Triton backend's build set os.environ["TRITON_INTERPRET"] itself (a
    process-wide side channel that could not work anyway: torch._dynamo imports Triton)."""
    script = (
        "import os\n"
        "import torch._dynamo\n"
        "from kernelscope.compiler.codegen.backends import choose_backend\n"
        "from kernelscope.compiler.codegen.triton.backend import InterpreterUnavailable\n"
        "from kernelscope.compiler.options import CompileOptions\n"
        "backend = choose_backend('triton', 'cpu', CompileOptions())\n"
        "try:\n"
        "    backend.build(None)\n"
        "    print('built')\n"
        "except InterpreterUnavailable as e:\n"
        "    print('refused', 'TRITON_INTERPRET=1' in str(e))\n"
        "print('env', os.environ.get('TRITON_INTERPRET'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["refused True", "env None"], proc.stdout


# -- device names: spelled in compiler/devices.py only ----------------------------------
DEVICE_MODULE = "compiler/devices.py"


def _device_literals(source: str) -> list[int]:
    """Lines of string literals that are exactly a device name ("cuda", 'cpu'): a name
    spelled, or compared, outside the module that owns them. Docstrings and comments
    that mention a device are prose, not literals of the name."""
    import io
    import tokenize

    from kernelscope.compiler.devices import DEVICES

    lines = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING:
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if value in DEVICES:
                lines.append(tok.start[0])
    return lines


def test_device_names_are_spelled_only_in_the_devices_module() -> None:
    found = []
    for p in sorted([*(REPO / "compiler").rglob("*.py"), *(REPO / "server").rglob("*.py")]):
        rel = p.relative_to(REPO).as_posix()
        if rel != DEVICE_MODULE:
            found += [f"{rel}:{n}" for n in _device_literals(p.read_text())]
    assert not found, "device names in compiler/ or server/ outside compiler/devices.py " \
                      "(use its CPU, CUDA, is_gpu, device_type):\n" + "\n".join(found)


def test_the_device_check_sees_a_planted_name() -> None:
    assert _device_literals('if device == "cuda":\n    pass\n') == [1]
    assert _device_literals("x = t.to('cpu')\n") == [1]
    assert _device_literals('"""Runs on "cuda" first."""\n# "cpu"\ny = "cudaish"\n') == []


# -- kernel kinds: a type (compiler/schedule/kinds.py), dispatched on, never a string ------
KINDS_MODULE = "compiler/schedule/kinds.py"
_KIND = r"""["'](?:pointwise|reduction|extern|template)["']"""
KIND_COMPARISON = re.compile(
    rf"""\bkind\s*[=!]=\s*{_KIND}|{_KIND}\s*[=!]=\s*[\w.]*\bkind\b"""
    rf"""|\bkind\s+(?:not\s+)?in\s*[(\[{{][^)\]}}]*{_KIND}""")


def _kind_comparisons(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1)
            if KIND_COMPARISON.search(line.split("#", 1)[0])]


def test_kernel_kinds_are_compared_as_the_enum_only() -> None:
    """A kernel's kind is a KernelKind: code asks its properties or compares members
    (`plan.kind is KernelKind.TEMPLATE`), never the string, so a new kind is one member."""
    found = [f"{p.relative_to(REPO).as_posix()}:{n}"
             for p in sorted((REPO / "compiler").rglob("*.py"))
             if p.relative_to(REPO).as_posix() != KINDS_MODULE
             for n in _kind_comparisons(p.read_text())]
    assert not found, "kernel kinds compared as strings (use KernelKind):\n" + "\n".join(found)


def test_the_kind_check_sees_a_planted_comparison() -> None:
    assert _kind_comparisons('    return buf if self.kind == "extern" else None\n') == [1]
    assert _kind_comparisons("if 'reduction' != step.kind:\n") == [1]
    assert _kind_comparisons('if plan.kind in ("pointwise", "template"):\n') == [1]
    assert not _kind_comparisons("if plan.kind is KernelKind.EXTERN:\n")
    assert not _kind_comparisons('if options.matmul == "extern":  # an option, not a kind\n')
    assert not _kind_comparisons('if kind == "vertical":\n')
