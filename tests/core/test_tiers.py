"""The test tiers keep to tests/tiers.py: every test it keeps out of the fast tier exists and
is marked `slow` from there alone, every area keeps its fast representatives, README.md runs
the fast tier and says what it leaves out, and CI runs the whole suite."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
sys.path.insert(0, str(TESTS))

import tiers  # noqa: E402


def _modules() -> list[str]:
    return sorted(p.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py"))


def test_every_slow_entry_names_a_test_that_exists() -> None:
    for key, why in tiers.SLOW.items():
        module, _, function = key.partition("::")
        assert (TESTS / module).is_file(), f"{key}: no such module under tests/"
        assert why.strip(), f"{key}: say why it is slow"
        if function:
            text = (TESTS / module).read_text()
            assert re.search(rf"^\s*def {re.escape(function)}\(", text, re.M), key


def test_no_module_marks_itself_slow() -> None:
    """tests/tiers.py is the one place: a module marking itself slow would be a second."""
    marked = [m for m in _modules() if re.search(r"mark\.slow\b", (TESTS / m).read_text())]
    assert marked == []


def test_every_area_keeps_a_fast_representative() -> None:
    for area, module in tiers.FAST_REPRESENTATIVES.items():
        assert (TESTS / module).is_file(), f"{area}: {module} does not exist"
        assert module not in tiers.SLOW, f"{area}: {module} is in the slow tier"
        tests = re.findall(r"^def (test_\w+)\(", (TESTS / module).read_text(), re.M)
        kept = [t for t in tests if f"{module}::{t}" not in tiers.SLOW]
        assert kept, f"{area}: every test of {module} is in the slow tier"


def test_the_hook_marks_what_the_table_names(request: pytest.FixtureRequest,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/conftest.py's hook, the one pytest loaded, on items the table names or not."""
    [root_conftest] = [p for p in request.config.pluginmanager.get_plugins()
                       if getattr(p, "__file__", None) == str(TESTS / "conftest.py")]
    monkeypatch.setattr(tiers, "SLOW", {"core/test_a.py": "why", "core/test_b.py::test_x": "why"})

    def item(module: str, function: str) -> Any:
        it = SimpleNamespace(path=TESTS / module, originalname=function, name=function, marks=[])
        it.add_marker = lambda mark: it.marks.append(mark.name)
        return it

    items = [item("core/test_a.py", "test_y"), item("core/test_b.py", "test_x"),
             item("core/test_b.py", "test_xy"), item("core/test_c.py", "test_x")]
    root_conftest.pytest_collection_modifyitems(None, items)
    assert [it.marks for it in items] == [["slow"], ["slow"], [], []]


def test_this_run_carries_the_marks(request: pytest.FixtureRequest) -> None:
    """Every collected test the table names is marked slow (and `-m "not slow"` drops it)."""
    for item in request.session.items:
        module = item.path.resolve().relative_to(TESTS).as_posix()
        key = f"{module}::{getattr(item, 'originalname', item.name)}"
        if module in tiers.SLOW or key in tiers.SLOW:
            assert item.get_closest_marker("slow") is not None, item.nodeid


def test_readme_runs_the_fast_tier_and_says_what_it_leaves_out() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    command = [i for i, line in enumerate(lines) if "scripts/setup.sh --test &&" in line]
    assert len(command) == 1, "README.md: one test command"
    i = command[0]
    assert f"scripts/setup.sh --test && {tiers.FAST_COMMAND}" in lines[i]
    after = " ".join(lines[i + 1:i + 8])
    assert "tests/tiers.py" in after and ".ci/run" in after, "say what it leaves out, and CI"


def test_readme_counts_the_samples() -> None:
    """README.md said 16 samples while samples/ held 18."""
    text = " ".join((REPO / "README.md").read_text().split())
    said = re.search(r"The (\d+) files in \[`samples/`\]", text)
    assert said is not None, "README.md: the sample count"
    assert int(said.group(1)) == len(list((REPO / "samples").glob("*.py")))


def test_ci_runs_the_whole_suite() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    runs = [line for line in ci.splitlines() if re.search(r"-m pytest\b", line)
            and not line.lstrip().startswith(("#", "echo"))]
    assert len(runs) == 1, runs
    assert tiers.FULL_COMMAND in runs[0]
    assert not re.search(r"\s-m\s+[\"']", runs[0]), "CI deselects nothing"
