"""What the page asks for before its scripts run, as `<link>` tags for webui/index.html.

- `<link rel="modulepreload">` for every module webui/js/main.js imports, directly or
  through another module: the browser fetches them all at once instead of one level of
  imports at a time (36 modules, four levels deep: four round trips before the first line
  of the page's code runs).
- `<link rel="preload" as="fetch">` of what main.js asks the API for before it can draw
  (the schema, samples and options; on a permalink its trace and the trace's first part),
  so those downloads run while the modules load; the page's own `fetch` of the same URL
  takes the preloaded answer. The list mirrors the first requests of webui/js/main.js.

In: the web UI's folder and, for a permalink, the trace id. Out: the tags, for
headers.page_html to put in the page's head. The module list is read from the files'
static imports (`import ... from "./x.js"`) and kept until a file changes.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

ENTRY = "js/main.js"
STATIC_IMPORT = re.compile(r'^\s*(?:import|export)\b[^;"]*?\bfrom\s+"(\.{1,2}/[^"]+)"'
                           r'|^\s*import\s+"(\.{1,2}/[^"]+)"', re.M)


def module_closure(webui_dir: Path) -> tuple[str, ...]:
    """The modules main.js loads before it runs, as paths under webui/, main.js first."""
    stamp = tuple(sorted((str(p), p.stat().st_mtime_ns) for p in webui_dir.rglob("*.js")))
    return _closure(str(webui_dir.resolve()), stamp)


@lru_cache(maxsize=4)
def _closure(root: str, _stamp: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    base = Path(root)
    seen: list[Path] = []
    todo = [base / ENTRY]
    while todo:
        path = todo.pop(0).resolve()
        if path in seen or not path.is_file() or not path.is_relative_to(base):
            continue
        seen.append(path)
        for found in STATIC_IMPORT.finditer(path.read_text(encoding="utf-8")):
            todo.append(path.parent / (found.group(1) or found.group(2)))
    return tuple(p.relative_to(base).as_posix() for p in seen)


# What main.js fetches before the explorer can show anything (its top-level `await` of the
# schema, boot's samples and options), and on a permalink its trace's head and first part
# (a trace stored whole answers the part with a 404, which the page ignores).
EXPLORER_FETCHES = ("/api/schema", "/api/samples", "/api/options")
PERMALINK_FETCHES = ("/api/traces/{id}", "/api/traces/{id}/parts/g0")


def page_fetches(trace_id: str | None) -> list[str]:
    """What the explorer (`/`, or the permalink of `trace_id`) asks the API for first."""
    quoted = quote(trace_id, safe="") if trace_id is not None else None
    permalink = [u.format(id=quoted) for u in PERMALINK_FETCHES] if quoted else []
    return [*EXPLORER_FETCHES, *permalink]


# Modules the page imports later (`import()`, which the list above does not follow), fetched
# with the rest so they are here when asked for: CodeMirror, which a permalink runs once its
# code pane is drawn (webui/js/editor.js).
LATER = ("vendor/codemirror.js",)


def preloaded_modules(webui_dir: Path) -> tuple[str, ...]:
    """Every module the page's head preloads: main.js's closure, then LATER."""
    found = module_closure(webui_dir)
    return (*found, *(m for m in LATER if m not in found and (webui_dir / m).is_file()))


def preload_links(webui_dir: Path, fetches: list[str] | tuple[str, ...] = ()) -> str:
    """The `<link>` tags for the page's head: its modules, and the API answers `fetches`."""
    links = [f'<link rel="modulepreload" href="/webui/{html.escape(m, quote=True)}">'
             for m in preloaded_modules(webui_dir)]
    links += [f'<link rel="preload" as="fetch" crossorigin="anonymous" '
              f'href="{html.escape(url, quote=True)}">' for url in fetches]
    return "\n  ".join(links)
