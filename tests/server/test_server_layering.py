"""The server's modules import each other without cycles (lazy imports count too).

A cycle hidden behind a function-level import (`server/__init__` <-> `queue`, `store` <->
`pgstore`) means two modules that cannot be read or tested apart; issue 19 item 5 asked
for them to go. The imports are read with `ast`, so an import inside a function counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "server"


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def graph() -> dict[str, set[str]]:
    modules = {_name(p): p for p in ROOT.rglob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name.removeprefix("kernelscope.") for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                base = node.module.removeprefix("kernelscope.")
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            for target in targets:
                if target in modules and target != module:
                    edges[module].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_server_modules_have_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_check_sees_a_planted_cycle() -> None:
    edges = graph()
    edges["server.store.sqlite"].add("server")
    assert cycles(edges)


def test_the_worker_builds_its_parts_without_the_flask_app() -> None:
    assert "server" not in graph()["server.jobs.remote"]
