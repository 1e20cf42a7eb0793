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


def test_every_pane_names_its_root_in_super() -> None:
    panes = _pane_classes()
    assert len(panes) >= 9, sorted(panes)
    for name, text in panes.items():
        assert re.search(r'super\(ctx, "div\.pane-body\.[\w-]+"\)', text), name
        assert "this.el =" not in text, f"{name} overwrites the root the base class made"
