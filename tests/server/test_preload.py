"""server/web/preload.py: the page's head lists every module main.js loads (each fetched at
once, not one level of imports at a time) and, on a permalink, its trace (its download
starts while the modules load)."""

from __future__ import annotations

import json
from pathlib import Path

from server_support import REPO, AppFactory

from kernelscope.server.state import of
from kernelscope.server.web.preload import module_closure, preload_links, preloaded_modules

FIXTURE = REPO / "tests" / "browser" / "fixtures" / "softmax_block.json"


def store_fixture(app: object) -> str:
    trace = json.loads(FIXTURE.read_text())
    return str(of(app).store.put(trace["code"], trace.get("options", {}), trace["events"], True))


def test_the_module_list_follows_static_imports_only(tmp_path: Path) -> None:
    (tmp_path / "js" / "panes").mkdir(parents=True)
    (tmp_path / "vendor").mkdir()
    files = {
        "js/main.js": 'import { a } from "./a.js";\nimport "./side.js";\n'
                      'export { b } from "./panes/b.js";\n'
                      'const lazy = () => import("./lazy.js");\n',
        "js/a.js": 'import {\n  x,\n  y,\n} from "../vendor/lib.js";\nexport const a = 1;\n',
        "js/side.js": 'import { a } from "./a.js";\n',
        "js/panes/b.js": 'import { h } from "../a.js";\nexport * from "./c.js";\n',
        "js/panes/c.js": "export const c = 3;\n",
        "js/lazy.js": 'import { z } from "./unlisted.js";\n',
        "vendor/lib.js": "export const x = 1, y = 2;\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    found = module_closure(tmp_path)
    assert found[0] == "js/main.js"
    assert sorted(found) == sorted(["js/main.js", "js/a.js", "js/side.js", "js/panes/b.js",
                                    "js/panes/c.js", "vendor/lib.js"])
    # A new import shows at once (the list is kept until a file changes).
    (tmp_path / "js" / "panes" / "c.js").write_text('import "../lazy.js";\nexport const c = 3;\n')
    assert "js/lazy.js" in module_closure(tmp_path)


def test_the_real_page_preloads_every_module_main_js_loads() -> None:
    found = module_closure(REPO / "webui")
    assert found[0] == "js/main.js"
    for module in ("js/editor.js", "js/panes/pane.js", "js/panes/code.js", "js/dom.js"):
        assert module in found
    assert all((REPO / "webui" / m).is_file() for m in found)
    # The analysis tabs' panes and the diff page are imported when needed, not at open.
    for module in ("js/panes/graph.js", "js/panes/timings.js", "js/diffpage.js"):
        assert module not in found
    # CodeMirror is imported once the page has drawn (editor.js), and preloaded all the same.
    assert "vendor/codemirror.js" not in found
    assert preloaded_modules(REPO / "webui") == (*found, "vendor/codemirror.js")
    links = preload_links(REPO / "webui")
    assert links.count('rel="modulepreload"') == len(found) + 1
    assert 'href="/webui/vendor/codemirror.js"' in links
    assert 'as="fetch"' not in links


def test_a_permalink_page_preloads_its_trace(make_app: AppFactory) -> None:
    app = make_app()
    client = app.test_client()
    trace_id = store_fixture(app)
    page = client.get(f"/t/{trace_id}").data.decode()
    head = page[:page.index("</head>")]
    fetch = '<link rel="preload" as="fetch" crossorigin="anonymous" href="{}">'
    for url in (f"/api/traces/{trace_id}?split=1", f"/api/traces/{trace_id}/parts/g0?split=1",
                "/api/schema", "/api/samples", "/api/options"):
        assert fetch.format(url) in head, url
    assert '<link rel="modulepreload" href="/webui/js/main.js">' in head
    # The trace first: the browser asks for six files at a time, in the head's order.
    first_module = head.index('rel="modulepreload"')
    trace = head.index(f'href="/api/traces/{trace_id}?split=1"')
    assert trace < head.index("/api/schema") < first_module
    explorer = client.get("/").data.decode()
    assert fetch.format("/api/schema") in explorer and "/api/traces/" not in explorer
    for url in ("/t/AAAAAAAAAAAA", f"/diff/{trace_id}/inductor", "/typo"):
        other = client.get(url).data.decode()
        assert '<link rel="modulepreload" href="/webui/js/main.js">' in other, url
        assert 'as="fetch"' not in other, url


def test_the_diff_page_preloads_its_own_modules(make_app: AppFactory) -> None:
    app = make_app()
    client = app.test_client()
    trace_id = store_fixture(app)
    page = client.get(f"/diff/{trace_id}/inductor").data.decode()
    for module in ("js/main.js", "js/diffpage.js", "js/panes/diff.js", "js/diff.js"):
        assert f'<link rel="modulepreload" href="/webui/{module}">' in page, module
    assert page.count('href="/webui/js/dom.js"') == 1  # each module once
    assert "js/diffpage.js" not in client.get(f"/t/{trace_id}").data.decode()
