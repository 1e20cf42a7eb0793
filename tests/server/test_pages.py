"""server/web/pages.py: the web UI's files compressed and cached, pages for permalinks and diffs,
and the page's own not-found view for paths that name nothing."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from server_support import AppFactory, compile_events

MAIN_JS = "export const answer = 42;\n" + "// padding to make compression worthwhile\n" * 40


@pytest.fixture
def webui(tmp_path: Path) -> Path:
    folder = tmp_path / "webui"
    (folder / "js").mkdir(parents=True)
    (folder / "vendor").mkdir()
    (folder / "index.html").write_text("<!doctype html><title>Kernelscope</title>\n" * 20)
    (folder / "js" / "main.js").write_text(MAIN_JS)
    (folder / "vendor" / "lib.js").write_text(MAIN_JS)
    return folder


def test_assets_are_gzipped_with_an_etag_and_revalidated(
    make_app: AppFactory, webui: Path
) -> None:
    client = make_app(WEBUI_DIR=str(webui)).test_client()
    plain = client.get("/webui/js/main.js")
    assert plain.status_code == 200 and plain.data.decode() == MAIN_JS
    assert "Content-Encoding" not in plain.headers
    assert plain.mimetype == "text/javascript"
    zipped = client.get("/webui/js/main.js", headers={"Accept-Encoding": "gzip, br"})
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.data).decode() == MAIN_JS
    assert len(zipped.data) < len(MAIN_JS) / 3
    assert zipped.headers["Vary"] == "Accept-Encoding"
    assert zipped.headers["Cache-Control"] == "no-cache"
    etag = zipped.headers["ETag"]
    assert etag != plain.headers["ETag"]  # one tag per encoding
    again = client.get(
        "/webui/js/main.js", headers={"Accept-Encoding": "gzip", "If-None-Match": etag}
    )
    assert again.status_code == 304 and again.data == b""
    (webui / "js" / "main.js").write_text(MAIN_JS + "// changed\n")
    changed = client.get(
        "/webui/js/main.js", headers={"Accept-Encoding": "gzip", "If-None-Match": etag}
    )
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    vendor = client.get("/webui/vendor/lib.js")
    assert vendor.headers["Cache-Control"] == "public, max-age=86400"
    assert client.get("/webui/js/nope.js").status_code == 404
    assert client.get("/webui/../conftest.py").status_code == 404


def test_index_is_compressed_and_never_cached_stale(make_app: AppFactory, webui: Path) -> None:
    client = make_app(WEBUI_DIR=str(webui)).test_client()
    index = client.get("/", headers={"Accept-Encoding": "gzip"})
    assert index.status_code == 200 and index.mimetype == "text/html"
    assert index.headers["Content-Encoding"] == "gzip"
    assert index.headers["Cache-Control"] == "no-store"  # a fresh CSP nonce each time
    assert b"Kernelscope" in gzip.decompress(index.data)


def test_permalinks_and_diffs_are_pages_and_unknown_ones_are_404_pages(
    make_app: AppFactory, webui: Path
) -> None:
    client = make_app(WEBUI_DIR=str(webui)).test_client()
    first = compile_events(client, "x = 1\n")[-1]["data"]["trace_id"]
    second = compile_events(client, "x = 2\n")[-1]["data"]["trace_id"]
    for url in (f"/t/{first}", f"/diff/{first}/{second}", f"/diff/{first}/inductor"):
        page = client.get(url)
        assert page.status_code == 200 and b"Kernelscope" in page.data, url
    for url in ("/t/AAAAAAAAAAAA", f"/diff/{first}/AAAAAAAAAAAA", "/tt/typo", "/index.htm"):
        page = client.get(url)
        assert page.status_code == 404 and page.mimetype == "text/html", url
        assert b"Kernelscope" in page.data, url
    api = client.get("/api/typo")
    assert api.status_code == 404 and api.is_json


def test_the_option_list_describes_every_field_a_request_may_set(make_app: AppFactory) -> None:
    import dataclasses

    from kernelscope.compiler.options import CompileOptions

    client = make_app().test_client()
    fields = client.get("/api/options").get_json()["options"]
    names = [f["name"] for f in fields]
    expected = [f.name for f in dataclasses.fields(CompileOptions)]
    # trace_dir writes files where the caller says: a user's own run sets it, a request never.
    hidden = ("cache_dir", "entry", "extra", "trace_dir")
    assert names == [n for n in expected if n not in hidden]
    assert all(f["help"] for f in fields), [f["name"] for f in fields if not f["help"]]
    reuse = next(f for f in fields if f["name"] == "memory_reuse")
    assert reuse["type"] == "bool" and reuse["default"] is True
    bad = client.post("/api/compile", json={"code": "x = 1", "options": {"memory_reuse": 3}})
    assert bad.status_code == 400 and "options.memory_reuse" in bad.get_json()["error"]
    big = client.post(
        "/api/compile", json={"code": "x = 1", "options": {"persistent_rblock": 1 << 40}}
    )
    assert big.status_code == 400
    ok = client.post("/api/compile", json={"code": "x = 1", "options": {"memory_reuse": False}})
    assert ok.status_code == 202


FIXTURES = Path(__file__).resolve().parents[1] / "browser" / "fixtures"


def _put(app: Any, name: str) -> str:
    import json

    from kernelscope.server.web.appstate import app_state

    stored = json.loads((FIXTURES / f"{name}.json").read_text())
    with app.app_context():
        ident: str = app_state().store.put(stored["code"], stored["options"], stored["events"],
                                            True)
    return ident


def test_a_diff_groups_two_stored_traces_by_fx_nodes(make_app: AppFactory) -> None:
    """GET /api/diff: the one matcher (compiler/compare) over two stored traces, or over a
    trace and its own Inductor follow-up."""
    app = make_app()
    client = app.test_client()
    fused, block = _put(app, "add_relu"), _put(app, "inductor_block")
    unfused = _put(app, "add_relu_nofusion")
    [group] = client.get(f"/api/diff/{fused}/{unfused}").get_json()["groups"]
    assert group["how"] == "same FX nodes" and group["nodes"] == ["add", "relu"]
    assert group["a"] == group["b"] == ["cpp_poi_fused_add_relu_0"]
    groups = client.get(f"/api/diff/{block}/inductor").get_json()["groups"]
    first = groups[0]
    assert first["how"] == "same FX nodes" and first["b"][0].startswith("cpp_fused_add_mul")
    assert any(b.startswith("extern_kernels.addmm:") for g in groups for b in g["b"])
    assert client.get(f"/api/diff/{fused}/AAAAAAAAAAAA").status_code == 404
