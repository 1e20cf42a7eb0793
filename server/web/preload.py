"""What the page asks for before its scripts run, as `<link>` tags for webui/index.html.

- `<link rel="modulepreload">` for every module webui/js/main.js imports, directly or
  through another module: the browser fetches them all at once instead of one level of
  imports at a time (36 modules, four levels deep: four round trips before the first line
  of the page's code runs).
- `<link rel="preload" as="fetch">` of what main.js asks the API for before it can draw
  (on a permalink its trace and the trace's first part; the schema, samples and options),
  so those downloads run while the modules load; the page's own `fetch` of the same URL
  takes the preloaded answer. The list mirrors the first requests of webui/js/main.js.
  These come first in the head: the browser asks for at most six files at a time from one
  server, in the order of the head, and a model's trace (megabytes, the longest answer)
  asked for after forty modules arrived after them, when the modules were all in and the
  page had nothing to draw yet.

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


def module_closure(webui_dir: Path, entry: str = ENTRY) -> tuple[str, ...]:
    """The modules `entry` (main.js) loads before it runs, as paths under webui/, it first."""
    stamp = tuple(sorted((str(p), p.stat().st_mtime_ns) for p in webui_dir.rglob("*.js")))
    return _closure(str(webui_dir.resolve()), entry, stamp)


@lru_cache(maxsize=8)
def _closure(root: str, entry: str, _stamp: tuple[tuple[str, int], ...]) -> tuple[str, ...]:
    base = Path(root)
    seen: list[Path] = []
    todo = [base / entry]
    while todo:
        path = todo.pop(0).resolve()
        if path in seen or not path.is_file() or not path.is_relative_to(base):
            continue
        seen.append(path)
        for found in STATIC_IMPORT.finditer(path.read_text(encoding="utf-8")):
            todo.append(path.parent / (found.group(1) or found.group(2)))
    return tuple(p.relative_to(base).as_posix() for p in seen)


# What main.js fetches before the explorer can show anything (its top-level `await` of the
# schema, boot's samples and options), and on a permalink its trace's head and first part,
# a big trace stored whole split as it is read (`split=1`, server/store/readsplit.py; a
# small trace answers the part with a 404, which the page ignores).
EXPLORER_FETCHES = ("/api/schema", "/api/samples", "/api/options")
PERMALINK_FETCHES = ("/api/traces/{id}?split=1", "/api/traces/{id}/parts/g0?split=1")


def page_fetches(trace_id: str | None) -> list[str]:
    """What the explorer (`/`, or the permalink of `trace_id`) asks the API for first."""
    quoted = quote(trace_id, safe="") if trace_id is not None else None
    permalink = [u.format(id=quoted) for u in PERMALINK_FETCHES] if quoted else []
    return [*permalink, *EXPLORER_FETCHES]


# Modules the page imports later (`import()`, which the list above does not follow), fetched
# with the rest so they are here when asked for: CodeMirror, which a permalink runs once its
# code pane is drawn (webui/js/editor.js). The analysis tabs' panes are not here: main.js
# imports each when its tab is first shown, and all of them once the page has opened, so
# the open asks for 20 modules, not 40 (webui/js/panes/lazy.js).
LATER = ("vendor/codemirror.js",)
# The diff page's own module (main.js imports it on /diff/<a>/<b> only), with what it loads.
DIFF_ENTRY = "js/diffpage.js"


def preloaded_modules(webui_dir: Path, entries: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Every module the page's head preloads: main.js's closure, then LATER, then the
    closure of each of the page's own `entries` (DIFF_ENTRY on the diff page)."""
    found = list(module_closure(webui_dir))
    for extra in (*LATER, *entries):
        if not (webui_dir / extra).is_file():
            continue
        more = module_closure(webui_dir, extra) if extra.startswith("js/") else (extra,)
        found += [m for m in more if m not in found]
    return tuple(found)


def preload_links(webui_dir: Path, fetches: list[str] | tuple[str, ...] = (),
                  entries: tuple[str, ...] = ()) -> str:
    """The `<link>` tags for the page's head: the API answers `fetches`, then its modules."""
    links = [f'<link rel="preload" as="fetch" crossorigin="anonymous" '
             f'href="{html.escape(url, quote=True)}">' for url in fetches]
    links += [f'<link rel="modulepreload" href="/webui/{html.escape(m, quote=True)}">'
              for m in preloaded_modules(webui_dir, entries)]
    return "\n  ".join(links)
