"""The web UI's panes take their root element from the Pane base class
(`super(ctx, "div.pane-body.x-pane")`), never by overwriting `this.el` after it: one place
builds a pane's root, so the base class's contract (docs/webui.md) holds for every pane."""

from __future__ import annotations

import re
from pathlib import Path

PANES = Path(__file__).resolve().parents[2] / "webui" / "js" / "panes"


def _pane_classes() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in sorted(PANES.glob("*.js")):
        text = path.read_text()
        if re.search(r"class \w+ extends Pane\b", text):
            found[path.name] = text
    return found


def _violation(name: str, text: str) -> str | None:
    if not re.search(r'super\(ctx, "div\.pane-body\.[\w-]+"\)', text):
        return f"{name} does not name its root in super(ctx, \"div.pane-body.x-pane\")"
    if re.search(r"\bthis\.el\s*=[^=]", text):
        return f"{name} overwrites the root the base class made"
    return None


def test_every_pane_names_its_root_in_super() -> None:
    panes = _pane_classes()
    assert len(panes) >= 9, sorted(panes)
    found = [v for name, text in panes.items() if (v := _violation(name, text))]
    assert not found, found


def test_the_check_sees_a_planted_root() -> None:
    good = 'class A extends Pane {\n  constructor(ctx) {\n    super(ctx, "div.pane-body.a-pane");\n'
    assert _violation("a.js", good + "  }\n}\n") is None
    assert "overwrites" in str(_violation("a.js", good + '    this.el = h("div.x");\n'))
    assert "does not name" in str(_violation("b.js", "class B extends Pane {\n  super(ctx);\n"))
