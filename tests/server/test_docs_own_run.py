"""docs/own-run.md says how to record your own run and open it (issue 18's "docs say how
to record and open your own run"): both ways to record (`kernelscope run`, the backend's
`trace_dir` option), both ways to open (`kernelscope open`, "Open run…" in the explorer,
which POSTs to /api/traces), and every `kernelscope` command line it shows is one the
CLI accepts, so the page cannot drift from the commands."""

from __future__ import annotations

import re
import shlex

import pytest
from server_support import REPO

from kernelscope.compiler.cli import _parser
from kernelscope.server.cli import parser as server_parser

DOC = REPO / "docs" / "own-run.md"


def command_lines() -> list[str]:
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", DOC.read_text(), re.S):
        for line in block.splitlines():
            if line.startswith("kernelscope "):
                lines.append(line.split("#", 1)[0].strip())
    return lines


def test_the_page_shows_both_ways_in_and_both_ways_to_open() -> None:
    text = DOC.read_text()
    commands = command_lines()
    assert any(c.startswith("kernelscope run ") for c in commands), commands
    assert any(c.startswith("kernelscope open ") for c in commands), commands
    assert 'backend="kernelscope", options={"trace_dir":' in text
    assert "Open run…" in text and "POST /api/traces" in (REPO / "docs" / "server.md").read_text()
    webui = (REPO / "webui" / "js" / "upload.js").read_text()
    assert "docs/own-run.md" in webui and "Open run…" in webui


@pytest.mark.parametrize("line", command_lines())
def test_every_command_the_page_shows_is_one_the_cli_accepts(line: str) -> None:
    argv = shlex.split(line)[1:]
    parse = server_parser() if argv[:1] == ["open"] else _parser()
    args = parse.parse_args(argv)  # exits (SystemExit) on anything it does not accept
    assert args.command in ("run", "open")
