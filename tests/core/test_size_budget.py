"""A size budget that can fail, in the spirit of tinygrad's line count: no product file over
600 lines, no Python function in compiler/ or server/ over 60 lines beyond a short list that
says why, none in the server's jobs group (server/jobs/) over 40, and compiler/ at most 24,100
lines.

A file or function that grows past the budget is split where it has a seam; the allow-list
is for the few whose length is their point, and may not grow past five entries.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 60
# The jobs group runs every job: its functions read as named steps, none over 40 lines.
JOBS_GROUP = "server/jobs"
MAX_JOBS_FUNCTION_LINES = 40
# 22,000 was the aim when the budget came (19,884 lines then). The round after added the
# TORCH_TRACE reader, the Inductor matcher, the profile's rows, combo kernels, CUDA graphs
# for training and the failure blame (23,425 lines); the next added collectives lowering,
# progress events and the TORCH_TRACE rebuild (24,670). A pass over all of compiler/ with no
# behaviour change (dead code, one rule in one place, lab notes out of comments) brought it
# to 24,009 on 2026-12-06; a realize rule and constant folding came, the process compile
# pool (measured on an H100 not to pay) went: 23,982. What is left to cut is features (the
# reference interpreter, the TORCH_TRACE reader, the own-run recorder, the profile's rows):
# docs/architecture.md. 24,150 on 2026-12-07 for the GPU explorer's latency (the pool loads
# kernels and builds their launchers; their reports come after the result: 30 lines).
MAX_COMPILER_LINES = 24_150
MAX_ALLOWED = 5
# The product: what ships and what a reader of the project reads (generated and vendored
# code aside: webui/vendor, extension/dist and node_modules are not here).
PRODUCT = (("compiler", "*.py"), ("server", "*.py"), ("webui/js", "*.js"),
           ("extension/src", "*.ts"))
# Functions allowed over MAX_FUNCTION_LINES: "path::qualified name" -> why.
ALLOWED = {
    "server/config.py::default_config":
        "the table of every configuration key, each with its comment: one dict literal",
    "compiler/lowering/scatter.py::_gathered":
        "the dense scatter's one body: last-wins and the reductions share its closures over "
        "the candidates' loaders",
}


def _product_files(root: Path = REPO) -> list[Path]:
    return sorted(p for folder, pattern in PRODUCT for p in (root / folder).rglob(pattern)
                  if "node_modules" not in p.parts and "__pycache__" not in p.parts)


def _lines(path: Path) -> int:
    return len(path.read_text(errors="replace").splitlines())


def long_files(files: list[Path], root: Path = REPO) -> list[str]:
    return [f"{p.relative_to(root)}: {n} lines" for p in files
            if (n := _lines(p)) > MAX_FILE_LINES]


def function_lengths(path: Path, root: Path = REPO) -> dict[str, int]:
    """"path::Class.function" -> its lines (def to last line; nested functions are counted
    in their parent and on their own)."""
    out: dict[str, int] = {}
    rel = path.relative_to(root).as_posix()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    out[f"{rel}::{name}"] = (child.end_lineno or child.lineno) - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text()), "")
    return out


def long_functions(files: list[Path], root: Path = REPO,
                   limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    found: dict[str, int] = {}
    for path in files:
        found |= {k: n for k, n in function_lengths(path, root).items() if n > limit}
    return found


def long_jobs_functions(files: list[Path], root: Path = REPO) -> dict[str, int]:
    """Functions of the jobs group over its own, stricter limit."""
    jobs = [p for p in files if p.relative_to(root).as_posix().startswith(f"{JOBS_GROUP}/")]
    return long_functions(jobs, root, MAX_JOBS_FUNCTION_LINES)


def _python(root: Path = REPO) -> list[Path]:
    return [p for p in _product_files(root) if p.suffix == ".py"]


def test_no_product_file_is_over_the_budget() -> None:
    assert long_files(_product_files()) == []


def test_no_function_is_over_the_budget_beyond_the_allow_list() -> None:
    found = long_functions(_python())
    over = {k: n for k, n in found.items() if k not in ALLOWED}
    assert over == {}, f"split these (or say why in ALLOWED, at most {MAX_ALLOWED}): {over}"


def test_no_function_of_the_jobs_group_is_over_its_budget() -> None:
    """No allow-list here: a jobs function past the limit is split into named parts."""
    assert long_jobs_functions(_python()) == {}


def test_the_allow_list_is_short_and_current() -> None:
    """At most five entries, each with its reason, each still over the budget (a function
    split below it leaves the list)."""
    assert len(ALLOWED) <= MAX_ALLOWED
    assert all(len(why) > 20 for why in ALLOWED.values())
    found = long_functions(_python())
    assert sorted(k for k in ALLOWED if k not in found) == []


def test_the_compiler_is_within_its_line_budget() -> None:
    total = sum(_lines(p) for p in (REPO / "compiler").rglob("*.py")
                if "__pycache__" not in p.parts)
    assert 10_000 < total <= MAX_COMPILER_LINES, f"compiler/ is {total} lines"


def test_the_budget_sees_planted_violations(tmp_path: Path) -> None:
    """A long file, a long function (and a long method, nested or not), a long JS file and a
    jobs function over its group's limit are each found; a short function and a long class of
    short methods are not."""
    (tmp_path / "compiler").mkdir()
    (tmp_path / "webui" / "js").mkdir(parents=True)
    (tmp_path / "server" / "jobs").mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    short = "".join(f"    def m{i}(self) -> int:\n        return {i}\n\n" for i in range(300))
    (tmp_path / "compiler" / "x.py").write_text(
        f"def long():\n{body}\n\ndef short():\n    return 1\n\n\nclass C:\n"
        f"    def method(self):\n        def inner():\n"
        + "".join(f"            y{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
        + "        return inner\n")
    (tmp_path / "compiler" / "ok.py").write_text(f"class K:\n{short}")
    (tmp_path / "webui" / "js" / "big.js").write_text("let a = 1;\n" * (MAX_FILE_LINES + 1))
    def lines(n: int) -> str:
        return "".join(f"    x{i} = {i}\n" for i in range(n))

    (tmp_path / "server" / "jobs" / "run.py").write_text(
        f"def step():\n{lines(MAX_JOBS_FUNCTION_LINES)}\n\n"
        f"def fits():\n{lines(MAX_JOBS_FUNCTION_LINES - 1)}")
    (tmp_path / "server" / "web.py").write_text(f"def view():\n{lines(MAX_JOBS_FUNCTION_LINES)}")
    files = _product_files(tmp_path)
    assert long_files(files, tmp_path) == ["compiler/ok.py: 901 lines",
                                           f"webui/js/big.js: {MAX_FILE_LINES + 1} lines"]
    found = long_functions([p for p in files if p.suffix == ".py"], tmp_path)
    assert found == {"compiler/x.py::long": MAX_FUNCTION_LINES + 1,
                     "compiler/x.py::C.method": MAX_FUNCTION_LINES + 3,
                     "compiler/x.py::C.method.inner": MAX_FUNCTION_LINES + 1}
    # The jobs group's stricter limit: a 41-line function there is caught, a 40-line one
    # there and a 41-line one elsewhere in the server are not.
    python = [p for p in files if p.suffix == ".py"]
    assert long_jobs_functions(python, tmp_path) == {
        "server/jobs/run.py::step": MAX_JOBS_FUNCTION_LINES + 1}
