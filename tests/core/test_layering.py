"""The compiler's packages import each other in one direction only.

The pipeline runs capture -> lowering -> schedule -> codegen -> runtime, and a package
may import only the packages before it (a stage knows the products of the stages before
it, never the ones after), with ir underneath all of them. Codegen never imports
lowering (lowering modules register ATen lowerings on import; codegen sees only IR and
the schedule). Top-level modules that import no package (options, events) are shared by
all; the drivers (compile_fx, pipeline, cli, ...) sit above every package.

The imports are read from the source with `ast`, so a lazy import inside a function or
under `if TYPE_CHECKING:` counts like any other.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2] / "compiler"
ORDER = ["compare", "events", "ir", "capture", "lowering", "schedule", "codegen", "runtime"]
# Packages of driver modules: they sit with compile_fx, pipeline and cli above every package.
DRIVERS = {"trace"}
FORBIDDEN = {("codegen", "lowering")}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return (node.module or "").removeprefix("kernelscope.")
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(imported compiler module, line, imported at module level) for each import."""
    tree = ast.parse(path.read_text())
    module = _module_name(path)
    top = {id(n) for n in _module_level(tree.body)}
    out: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name.removeprefix("kernelscope.") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, module, path.name == "__init__.py")
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            if name == "compiler" or name.startswith("compiler."):
                out.append((name, node.lineno, id(node) in top))
    return out


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements that run at import time (including those under `if` and `try`)."""
    out: list[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, (ast.If, ast.Try)):
            for block in ([stmt.body, stmt.orelse] if isinstance(stmt, ast.If) else
                          [stmt.body, stmt.orelse, stmt.finalbody,
                           *[h.body for h in stmt.handlers]]):
                out.extend(_module_level(block))
    return out


def _files() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The compiler module an imported name refers to (`compiler.ir.ops.ops` -> ir.ops)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _package(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in DRIVERS:
        return None
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ORDER) else None


def _graph() -> dict[str, list[tuple[str, int, bool]]]:
    modules = _files()
    graph: dict[str, list[tuple[str, int, bool]]] = {}
    for name, path in modules.items():
        edges = []
        for imported, line, top in _imports(path):
            target = _known(imported, modules)
            if target is not None and target != name and (target, line, top) not in edges:
                edges.append((target, line, top))
        graph[name] = _without_parents(edges)
    return graph


def _without_parents(edges: list[tuple[str, int, bool]]) -> list[tuple[str, int, bool]]:
    """`from compiler import check` imports the module compiler.check, not the package's
    `__init__` for a name of its own: an edge to a package is dropped where the same line
    imports a module inside it."""
    return [(t, line, top) for t, line, top in edges
            if not any(o.startswith(t + ".") and ol == line for o, ol, _ in edges)]


def _shared_modules(graph: dict[str, list[tuple[str, int, bool]]]) -> set[str]:
    """Top-level modules that import no package: importable from anywhere."""
    return {m for m, edges in graph.items()
            if _package(m) is None and m != "compiler"
            and not any(_package(t) for t, _, _ in edges)}


def test_packages_are_known() -> None:
    found = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    known = set(ORDER) | DRIVERS
    assert found == known, f"add new packages to ORDER or DRIVERS in this test: {found ^ known}"


def test_packages_import_only_earlier_packages() -> None:
    graph = _graph()
    shared = _shared_modules(graph)
    bad = []
    for module, edges in graph.items():
        src = _package(module)
        if src is None:
            continue
        for target, line, _ in edges:
            dst = _package(target)
            where = f"{module}:{line} imports {target}"
            if dst is None:
                if target not in shared:
                    bad.append(f"{where} (a driver module; packages must not import it)")
            elif dst != src and (ORDER.index(dst) > ORDER.index(src)
                                 or (src, dst) in FORBIDDEN):
                bad.append(f"{where} ({src} must not import {dst})")
    assert not bad, "\n".join(bad)


# Commands that must set their environment from their arguments before a library they
# reach through another package reads it (Triton reads TRITON_CACHE_DIR at import).
ENVIRONMENT_FIRST = {"compiler.runtime.triton_prebuild"}


def test_no_lazy_imports_across_packages() -> None:
    """A function-level import from another package is how a cycle gets hidden."""
    bad = []
    for module, edges in _graph().items():
        src = _package(module)
        if src is None or module in ENVIRONMENT_FIRST:
            continue
        bad += [f"{module}:{line} imports {target} inside a function"
                for target, line, top in edges if not top and _package(target) != src]
    assert not bad, "\n".join(bad)


def test_no_import_cycles_between_modules() -> None:
    graph = {m: sorted({t for t, _, top in edges if top}) for m, edges in _graph().items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, []):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (cycle := visit(t)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in graph:
        if m not in state and (cycle := visit(m)):
            pytest.fail("import cycle: " + " -> ".join(cycle))


def _cycle(graph: dict[str, list[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for t in graph.get(m, []):
            if state.get(t) == 1:
                return stack[stack.index(t):] + [t]
            if t not in state and (cycle := visit(t)):
                return cycle
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def _all_edges(graph: dict[str, list[tuple[str, int, bool]]]) -> dict[str, list[str]]:
    """Every import, function-level ones too; the lowering table's load_all aside (it
    imports every lowering on purpose, after they are all defined)."""
    return {m: sorted({t for t, _, _ in edges}) for m, edges in graph.items()
            if m != LOAD_ALL}


def test_no_import_cycles_even_through_function_level_imports() -> None:
    """A function-level import must not be what keeps a cycle from failing at import time
    (the package's `__init__` -> compile_fx -> the trace writer -> pipeline, for the
    version, -> `__init__` was one): the version lives in compiler/versions.py."""
    cycle = _cycle(_all_edges(_graph()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_sees_a_planted_lazy_cycle() -> None:
    graph = _graph()
    planted = {**graph, "compiler.versions": [*graph["compiler.versions"],
                                              ("compiler.pipeline", 30, False)]}
    cycle = _cycle(_all_edges(planted))
    assert cycle is not None and "compiler.versions" in cycle


SERVER = re.compile(r"^(kernelscope\.)?server(\.|$)")


def _server_imports(root: Path) -> list[str]:
    """Imports of the server (kernelscope.server, or a top-level `server`) by a module under
    `root`, function-level and TYPE_CHECKING ones included, and `import_module` calls
    naming it."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            elif isinstance(node, ast.Call) and node.args and \
                    getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module" \
                    and isinstance(node.args[0], ast.Constant):
                names = [str(node.args[0].value)]
            bad += [f"{path.relative_to(root.parent)}:{node.lineno} imports {n}"  # type: ignore[attr-defined]
                    for n in names if SERVER.match(n)]
    return bad


def test_the_compiler_never_imports_the_server() -> None:
    """The compiler is a library: no Flask, no jobs, no store. The commands that serve or
    store live in server/cli.py; kernelscope/cli.py sends each command where it belongs."""
    assert _server_imports(ROOT) == []


def test_the_server_import_check_sees_planted_violations(tmp_path: Path) -> None:
    pkg = tmp_path / "compiler" / "trace"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text(
        "import importlib\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kernelscope.server.store import sqlite\n"
        "def f():\n    import kernelscope.server.cli\n"
        "    return importlib.import_module('kernelscope.server.open_cmd')\n"
        "from kernelscope.serverless import y\n")
    found = _server_imports(tmp_path / "compiler")
    assert found == ["compiler/trace/x.py:4 imports kernelscope.server.store",
                     "compiler/trace/x.py:6 imports kernelscope.server.cli",
                     "compiler/trace/x.py:7 imports kernelscope.server.open_cmd"], found


def test_checker_sees_a_violation(tmp_path: Path) -> None:
    """The reader finds lazy imports and TYPE_CHECKING imports, so the tests can fail."""
    src = tmp_path / "compiler" / "schedule" / "x.py"
    src.parent.mkdir(parents=True)
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                   "    from compiler.codegen.kernel import K\n"
                   "def f():\n    from compiler.runtime import loader\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path / "compiler"
    try:
        found = _imports(src)
    finally:
        ROOT = saved
    assert ("compiler.codegen.kernel", 3, True) in found
    assert ("compiler.runtime.loader", 5, False) in found


def _code_lines(path: Path) -> list[str]:
    out = []
    for line in path.read_text().splitlines():
        text = " ".join(line.split("#", 1)[0].split())
        if text and text not in ("(", ")", "]", "}", "):", "],", "},") and \
                not text.startswith(("import ", "from ")):
            out.append(text)
    return out


def test_no_six_lines_repeat_between_the_triton_and_cpp_generators() -> None:
    """The kernel skeleton lives once, in codegen/kernel.py: the two generators share no
    run of six code lines (blank lines, comments, imports and lone brackets aside)."""
    triton = _code_lines(ROOT / "codegen" / "triton" / "kernel.py")
    cpp = _code_lines(ROOT / "codegen" / "cpp" / "kernel.py")
    runs = {tuple(triton[i:i + 6]) for i in range(len(triton) - 5)}
    shared = [cpp[i:i + 6] for i in range(len(cpp) - 5) if tuple(cpp[i:i + 6]) in runs]
    assert len(runs) > 100 and len(cpp) > 100  # both generators were read
    assert not shared, shared[:3]


# -- inside lowering: the walk (lowering/graph.py) above the lowerings ---------------------
# A lowering module sees the graph through lowering/common.py's LoweringContext, never the
# walk itself: importing graph.py fills the lowering table (registry.load_all), so a
# lowering that imported it would close the import circle the context exists to break.
WALK = "compiler.lowering.graph"
# Modules of the lowering package that import nothing that fills the table.
TABLE_FREE = ("compiler.lowering.common", "compiler.lowering.layout",
              "compiler.lowering.registry")
LOAD_ALL = "compiler.lowering.registry"  # its load_all imports every lowering, on purpose


def _lowering_violations(graph: dict[str, list[tuple[str, int, bool]]]) -> list[str]:
    bad = []
    for module, edges in graph.items():
        if not module.startswith("compiler.lowering.") or module == WALK:
            continue
        for target, line, top in edges:
            if target == WALK:
                bad.append(f"{module}:{line} imports the walk ({WALK}); use lowering.common")
            elif not top and module != LOAD_ALL and target.startswith("compiler.lowering"):
                bad.append(f"{module}:{line} imports {target} inside a function")
    for module in TABLE_FREE:
        seen, stack = set(), [module]
        while stack:
            m = stack.pop()
            for target, _, top in graph.get(m, []):
                if top and target not in seen:
                    seen.add(target)
                    stack.append(target)
        fills = sorted(t for t in seen if t.startswith("compiler.lowering.")
                       and t not in TABLE_FREE)
        if fills:
            bad.append(f"{module} imports {', '.join(fills)} (lowerings fill the table)")
    return bad


def test_lowerings_see_the_graph_through_the_context_only() -> None:
    assert not _lowering_violations(_graph()), "\n".join(_lowering_violations(_graph()))


def test_the_lowering_rules_see_planted_violations() -> None:
    graph = _graph()
    planted = {**graph,
               "compiler.lowering.views": [*graph["compiler.lowering.views"],
                                           (WALK, 7, True),
                                           ("compiler.lowering.reductions", 9, False)],
               "compiler.lowering.common": [*graph["compiler.lowering.common"],
                                            ("compiler.lowering.pointwise", 3, True)]}
    found = "\n".join(_lowering_violations(planted))
    assert "views:7 imports the walk" in found
    assert "views:9 imports compiler.lowering.reductions inside a function" in found
    assert "compiler.lowering.common imports compiler.lowering.pointwise" in found


# The walk's position, read directly or through the graph's own helpers for it.
CURRENT = re.compile(r"\bg\s*\.\s*(?:current\b|out_meta\s*\(|node_name\s*\()"
                     r"|getattr\(\s*g\s*,\s*['\"](?:current|out_meta|node_name)")


def _reads_of_current(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1)
            if CURRENT.search(line.split("#", 1)[0])]


def test_lowerings_take_their_node_and_never_read_the_walks_position() -> None:
    """Each lowering is fn(g, node, ...) and hands `node` to the helpers it calls: the FX
    node comes as an argument; `g.current`, `g.out_meta()` and `g.node_name()` (the walk's
    position) are no part of LoweringContext, so mypy refuses them too."""
    found = [f"{p.name}:{n}" for p in sorted((ROOT / "lowering").glob("*.py"))
             if p.name != "graph.py" for n in _reads_of_current(p.read_text())]
    assert not found, found
    assert _reads_of_current("    return g.extern(g.current.target, args, {})\n") == [1]
    assert _reads_of_current("    n = getattr(g, 'current')\n") == [1]
    assert _reads_of_current("    meta = g.out_meta()\n") == [1]
    assert _reads_of_current('    g.notes.append(f"{g.node_name()}: copied")\n') == [1]
    assert not _reads_of_current("    meta = out_meta(node)\n")
    assert not _reads_of_current("    return g.extern(node.target, args, {})  # g.current\n")


# A lowering module's graph parameter typed as anything but the context.
UNTYPED_G = re.compile(r"\bg\s*:\s*(?!LoweringContext\b)\w")


def _untyped_graph_params(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1)
            if UNTYPED_G.search(line.split("#", 1)[0])]


def test_lowering_modules_type_the_graph_as_the_context() -> None:
    """`g` is a LoweringContext in every lowering module (GraphLowering itself is `self`),
    so mypy checks each use of it against the Protocol."""
    found = [f"{p.name}:{n}" for p in sorted((ROOT / "lowering").glob("*.py"))
             for n in _untyped_graph_params(p.read_text())]
    assert not found, found
    assert _untyped_graph_params("def copy_to(g: Any, node: Node) -> Stored:\n") == [1]
    assert not _untyped_graph_params("def nhwc(g: LoweringContext, node: Node) -> Stored:\n")


# The walk's own position, kept by the walk (GraphLowering) for its builders to read.
POSITION = re.compile(r"\bself\s*\.\s*(?:current\b|out_meta\s*\(|node_name\s*\()")
# LoweringContext's members that make IR for a node: each is handed that node first.
BUILDERS = ("lazy", "make_reduction", "reduction_buffer", "allocate", "extern")


def _builders_without_their_node(cls: type) -> list[str]:
    import inspect

    return [name for name in BUILDERS
            if list(inspect.signature(getattr(cls, name)).parameters)[1:2] != ["node"]]


def test_the_walk_keeps_no_position_and_builders_take_their_node() -> None:
    """The builders a lowering calls (`g.lazy`, `g.extern`, ...) name the FX node they build
    for (the origin of a body, the fallback's node, the extern's meta) as their first
    argument, so GraphLowering keeps no `current` node for them to read: a body's origin
    cannot come from wherever the walk happens to be."""
    from kernelscope.compiler.lowering.common import LoweringContext
    from kernelscope.compiler.lowering.graph import GraphLowering

    text = (ROOT / "lowering" / "graph.py").read_text()
    found = [n for n, line in enumerate(text.splitlines(), 1)
             if POSITION.search(line.split("#", 1)[0])]
    assert not found, f"lowering/graph.py keeps the walk's position at lines {found}"
    assert not _builders_without_their_node(LoweringContext)
    assert not _builders_without_their_node(GraphLowering)


def test_the_position_rules_see_planted_violations() -> None:
    assert POSITION.search("            self.current = node")
    assert POSITION.search("        origin = self.node_name()")
    assert not POSITION.search("        origin = node.name")

    class Old:
        def lazy(self, inner_fn: Any, size: Any, dtype: Any, inputs: Any = ()) -> Any: ...
        def make_reduction(self, node: Any, inner_fn: Any) -> Any: ...
        def reduction_buffer(self, body: Any, node: Any) -> Any: ...
        def allocate(self, node: Any, reason: str) -> Any: ...
        def extern(self, op: Any, node: Any) -> Any: ...

    assert _builders_without_their_node(Old) == ["lazy", "reduction_buffer", "extern"]


def test_a_lowering_with_another_signature_is_refused_at_registration() -> None:
    from kernelscope.compiler.lowering.registry import LOWERINGS, register_lowering

    def old_style(g: Any, x: Any) -> Any:
        return x

    with pytest.raises(TypeError, match=r"fn\(g, node, \*args"):
        register_lowering("not-an-op")(old_style)
    assert "not-an-op" not in LOWERINGS
