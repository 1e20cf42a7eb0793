"""The server's modules import each other one way, and without cycles (lazy imports count).

The server is four groups, each importing only the groups after it: web (the HTTP tier)
-> jobs (running compiles) -> sandbox (isolating one) -> store (keeping traces). The
top-level modules (the app factory in `__init__`, config, runtime, state, cli, open_cmd)
build the groups and sit above them all: no group imports them. A process's entry module
(gunicorn's app factory, the RQ worker's main) is top-level too, wherever it lives.

A cycle hidden behind a function-level import means two modules that cannot be read or
tested apart. The imports are read with `ast`, so an import inside a function counts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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


GROUPS = ["web", "jobs", "sandbox", "store"]
# Entry modules: each is a process's own top (they build the app or the runtime).
ENTRIES = {
    "server.web.wsgi": "gunicorn's app factory: makes the app (create_app) in each worker",
    "server.jobs.rqworker": "`kernelscope worker`'s main: builds its runtime, validates as "
                            "the web tier does",
}


def group(module: str) -> str | None:
    """The module's group, or None for the top level (and entry modules)."""
    parts = module.split(".")
    if module in ENTRIES or len(parts) < 3 or parts[1] not in GROUPS:
        return None
    return parts[1]


def order_violations(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(edges.items()):
        src = group(module)
        if src is None:
            continue
        for target in sorted(targets):
            dst = group(target)
            if dst is None:
                bad.append(f"{module} imports {target} (the top level builds the groups; "
                           "no group imports it)")
            elif GROUPS.index(dst) < GROUPS.index(src):
                bad.append(f"{module} imports {target} ({src} must not import {dst})")
    return bad


def test_the_groups_import_one_way() -> None:
    assert order_violations(graph()) == []


def test_the_order_check_sees_planted_violations() -> None:
    edges = graph()
    edges["server.store.sqlite"].add("server.jobs.manager")
    edges["server.sandbox.launch"].add("server.web.api")
    edges["server.jobs.worker"].add("server.state")
    found = order_violations(edges)
    assert found == [
        "server.jobs.worker imports server.state (the top level builds the groups; no group "
        "imports it)",
        "server.sandbox.launch imports server.web.api (sandbox must not import web)",
        "server.store.sqlite imports server.jobs.manager (store must not import jobs)"]


def test_every_module_is_in_a_group_or_the_top_level() -> None:
    top = {m for m in graph() if group(m) is None and m not in ENTRIES}
    assert top == {"server", "server.__main__", "server.cli", "server.config",
                   "server.open_cmd", "server.runtime", "server.state",
                   *(f"server.{g}" for g in GROUPS)}


def test_server_modules_have_no_import_cycle() -> None:
    assert cycles(graph()) == []


def test_the_check_sees_a_planted_cycle() -> None:
    edges = graph()
    edges["server.store.sqlite"].add("server")
    assert cycles(edges)


def test_the_worker_builds_its_parts_without_the_flask_app() -> None:
    assert "server" not in graph()["server.jobs.remote"]


# A mode compared as a string: the sandbox's modes are Enums (IsolationMode, CgroupVersion).
MODE_STRING = re.compile(
    r"""(?:[!=]=|\bin\b)\s*\(?["'](?:bubblewrap|rlimits-only|v1|v2|none)["']""")


def mode_strings(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1)
            if MODE_STRING.search(line.split("#", 1)[0])]


def test_modes_are_types_not_strings() -> None:
    from kernelscope.server.sandbox.cgroups import CgroupSupport, CgroupVersion
    from kernelscope.server.sandbox.launch import Isolation, IsolationMode

    found = {str(p.relative_to(ROOT.parent)): lines for p in sorted(ROOT.rglob("*.py"))
             if (lines := mode_strings(p.read_text()))}
    assert found == {}
    assert Isolation("rlimits-only").mode is IsolationMode.RLIMITS_ONLY
    assert not Isolation("rlimits-only").bubblewrap and not CgroupSupport("none").present
    assert CgroupSupport("v2").version is CgroupVersion.V2
    with pytest.raises(ValueError):
        Isolation("chroot")
    assert mode_strings('    if iso.mode == "bubblewrap":\n') == [1]
    assert mode_strings('        if support.version != "none":\n') == [1]
    assert mode_strings('    if preference in ("auto", "bubblewrap"):\n') == []
    assert not mode_strings('    if iso.bubblewrap:  # mode == "bubblewrap"\n')
