"""Pygments highlighting for kernel and wrapper sources shown by the web UI.

In: source text and a language name. Out: HTML where every line is its own element,
`<span id="L-<n>">` (1-based), so the UI can colour the lines a provenance link points to;
and the matching stylesheet.
"""

from __future__ import annotations

from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import (
    CLexer,
    CppLexer,
    GasLexer,
    LlvmLexer,
    ObjdumpLexer,
    PtxLexer,
    PythonLexer,
    TextLexer,
)
from pygments.styles import get_all_styles

LEXERS: dict[str, type[Lexer]] = {
    "python": PythonLexer,
    "triton": PythonLexer,
    "cpp": CppLexer,
    "c": CLexer,
    "text": TextLexer,
    "llvm": LlvmLexer,  # Triton's LLVM IR
    "ptx": PtxLexer,
    "asm": GasLexer,  # SASS and g++ assembly read well enough as GNU as
    "objdump": ObjdumpLexer,
}
SOURCES = ("python", "triton", "cpp", "c")  # what a user writes; the rest a compiler prints
CSS_CLASS = "highlight"


def highlight(code: str, language: str) -> str:
    """HTML for `code`: `<div class="highlight"><pre>` with one span per line."""
    lexer = LEXERS[language](stripnl=False, ensurenl=True)
    formatter = HtmlFormatter(cssclass=CSS_CLASS, linespans="L")
    return pygments_highlight(code, lexer, formatter)


def stylesheet(style: str = "default") -> str:
    """CSS for the `.highlight` class in a Pygments style."""
    if style not in set(get_all_styles()):
        raise ValueError(f"unknown style {style!r}")
    return str(HtmlFormatter(style=style).get_style_defs(f".{CSS_CLASS}"))
