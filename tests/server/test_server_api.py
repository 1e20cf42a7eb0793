"""The JSON API's contract: validation, JSON errors, samples, health, highlighting, pages."""

from __future__ import annotations

from pathlib import Path

import pytest
from flask.testing import FlaskClient
from server_support import AppFactory, compile_events, state

ALL_BACKENDS = True  # every test runs on each back-end (server_support.BACKENDS)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "'code' is required"),
        ({"code": ""}, "'code' is required"),
        ({"code": "   \n"}, "'code' is required"),
        ({"code": 42}, "'code' is required"),
        ({"code": "x = 1", "options": "fast"}, "options must be an object"),
        ({"code": "x = 1", "options": {"device": "tpu"}}, "options.device"),
        ({"code": "x = 1", "options": {"backend": "llvm"}}, "options.backend"),
        ({"code": "x = 1", "options": {"fusion": "yes"}}, "options.fusion"),
        ({"code": "x = 1", "options": {"turbo": True}}, "unknown option(s): turbo"),
        ({"code": "x = 1", "entry": "os.system('x')"}, "'entry' must be a Python name"),
        ({"code": "x = 1", "inputs": [[1.0, 2.0]]}, "'inputs' is not supported"),
        ({"code": "x = 1", "options": {"device": "cuda:1"}}, "options.device"),
    ],
)

def test_compile_rejects_bad_requests(client: FlaskClient, body: dict, message: str) -> None:
    response = client.post("/api/compile", json=body)
    assert response.status_code == 400
    assert message in response.get_json()["error"]


def test_compile_rejects_code_over_the_cap(client: FlaskClient) -> None:
    response = client.post("/api/compile", json={"code": "#" * (64 * 1024 + 1)})
    assert response.status_code == 400
    assert "too large" in response.get_json()["error"]


def test_compile_needs_a_json_object(client: FlaskClient) -> None:
    cases = [
        client.post(
            "/api/compile", data="code=x", content_type="application/x-www-form-urlencoded"
        ),
        client.post("/api/compile", data="{not json", content_type="application/json"),
        client.post("/api/compile", json=["x = 1"]),
    ]
    assert [r.status_code for r in cases] == [400, 400, 400]
    assert "Content-Type: application/json" in cases[0].get_json()["error"]
    assert "not valid JSON" in cases[1].get_json()["error"]
    assert "JSON object" in cases[2].get_json()["error"]


def test_body_over_max_content_length_is_json_413(client: FlaskClient) -> None:
    response = client.post("/api/compile", data="x" * (2 << 20), content_type="application/json")
    assert response.status_code == 413
    assert response.is_json and "error" in response.get_json()


def test_options_get_defaults_and_auto_backend(client: FlaskClient) -> None:
    events = compile_events(client, "x = 1\n", device="cpu")
    source = events[0]["data"]
    assert (source["device"], source["backend"]) == ("cpu", "cpp")
    assert source["options"] == {"fusion": True, "inductor": False}


def test_unknown_things_answer_json_404(client: FlaskClient) -> None:
    for url in (
        "/api/jobs/nope",
        "/api/jobs/nope/events",
        "/api/traces/AAAAAAAAAAAA",
        "/api/traces/../../etc",
        "/api/no/such/route",
    ):
        response = client.get(url)
        assert response.status_code == 404, url
        assert response.is_json and "error" in response.get_json(), url
    # Pages answer the web UI itself with 404: it shows its own not-found view.
    for url in ("/t/AAAAAAAAAAAA", "/no/such/page", "/diff/AAAAAAAAAAAA/inductor"):
        response = client.get(url)
        assert response.status_code == 404, url
        assert response.mimetype == "text/html", url


def test_wrong_method_is_json_405(client: FlaskClient) -> None:
    response = client.get("/api/compile")
    assert response.status_code == 405
    assert response.is_json


def test_samples_lists_titles_and_code(make_app: AppFactory, tmp_path: Path) -> None:
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "gelu.py").write_text('"""GELU, tanh form.\n\nMore."""\nimport torch\n')
    (samples / "add_relu.py").write_text("# add then relu\nimport torch\n")
    (samples / "_helpers.py").write_text("x = 1\n")
    (samples / "notes.txt").write_text("not a sample\n")
    client = make_app(SAMPLES_DIR=str(samples)).test_client()
    listed = client.get("/api/samples").get_json()["samples"]
    assert [(s["name"], s["title"]) for s in listed] == [
        ("add_relu", "add then relu"),
        ("gelu", "GELU, tanh form."),
    ]
    assert listed[1]["code"].startswith('"""GELU')


def test_health_reports_devices_versions_isolation_and_jobs(client: FlaskClient) -> None:
    health = client.get("/api/health").get_json()
    assert health["ok"] is True
    assert health["isolation"] in ("bubblewrap", "rlimits-only")
    assert set(health["jobs"]) >= {"running", "queued"}
    assert "cuda" in health["devices"] and "gpu" in health["devices"]
    assert health["versions"]["python"] and "torch" in health["versions"]
    assert health["limits"]["wall_s"] == 5


def test_highlight_gives_one_element_per_line(client: FlaskClient) -> None:
    code = "def f(x):\n    return x + 1\n"
    html = client.post("/api/highlight", json={"code": code, "language": "python"}).get_json()
    assert 'id="L-1"' in html["html"] and 'id="L-2"' in html["html"]
    assert 'id="L-3"' not in html["html"]
    cpp = client.post("/api/highlight", json={"code": "int x = 1;", "language": "cpp"})
    assert 'class="highlight"' in cpp.get_json()["html"]
    bad = client.post("/api/highlight", json={"code": "x", "language": "cobol"})
    assert bad.status_code == 400


def test_highlight_css(client: FlaskClient) -> None:
    response = client.get("/api/highlight.css")
    assert response.status_code == 200
    assert response.mimetype == "text/css" and ".highlight" in response.get_data(as_text=True)
    assert client.get("/api/highlight.css?style=nope").status_code == 400


@pytest.fixture
def webui(tmp_path: Path) -> Path:
    folder = tmp_path / "webui"
    (folder / "js").mkdir(parents=True)
    (folder / "index.html").write_text("<!doctype html><title>Kernelscope</title>")
    (folder / "js" / "app.js").write_text("export const x = 1;")
    return folder


def test_pages_serve_the_webui(make_app: AppFactory, webui: Path) -> None:
    client = make_app(WEBUI_DIR=str(webui)).test_client()
    index = client.get("/")
    assert index.status_code == 200 and b"Kernelscope" in index.data
    assert index.mimetype == "text/html"
    script = client.get("/webui/js/app.js")
    assert script.status_code == 200 and b"export" in script.data
    assert client.get("/webui/../conftest.py").status_code == 404
    assert client.get("/webui/%2e%2e/secret").status_code == 404


def test_permalink_page_serves_the_webui_for_a_stored_trace(
    make_app: AppFactory, webui: Path
) -> None:
    app = make_app(WEBUI_DIR=str(webui))
    client = app.test_client()
    done = compile_events(client, "x = 1\n")[-1]
    page = client.get(f"/t/{done['data']['trace_id']}")
    assert page.status_code == 200 and b"Kernelscope" in page.data
    assert client.get("/t/AAAAAAAAAAAA").status_code == 404


def test_missing_webui_is_a_clear_404(make_app: AppFactory, tmp_path: Path) -> None:
    client = make_app(WEBUI_DIR=str(tmp_path / "nothing")).test_client()
    response = client.get("/")
    assert response.status_code == 404 and "web UI is missing" in response.get_json()["error"]


def test_trusted_hosts_refuse_a_rebound_name(make_app: AppFactory) -> None:
    client = make_app(TRUSTED_HOSTS=["localhost", "127.0.0.1"]).test_client()
    assert client.get("/api/health").status_code == 200
    evil = client.get("/api/health", headers={"Host": "evil.example"})
    assert evil.status_code == 400 and evil.is_json


@pytest.mark.embedded_only
def test_apps_do_not_share_state(make_app: AppFactory, tmp_path: Path) -> None:
    first = make_app()
    second = make_app(DATABASE=str(tmp_path / "other.sqlite3"))
    assert state(first).jobs is not state(second).jobs
    paths = [state(a).store.inner.path for a in (first, second)]  # type: ignore[attr-defined]
    assert paths[0] != paths[1]
