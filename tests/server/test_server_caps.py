"""Hostile input to the HTTP side: caps on requests, events, traces and replays; headers.

Each test is one finding of the security review (the number in its docstring): it failed
against the server before the fix. They use the fake worker (tests/server/fake_worker.py),
which exec()s the snippet, so a snippet here can print whatever a hostile one would.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
import threading

import pytest
from flask import Flask
from flask.testing import FlaskClient
from server_support import REPO, AppFactory, compile_events, first_error, state, submit, wait_until

from kernelscope.server.jobs.inputs import sanitize
from kernelscope.server.web import hlpool

DATA = REPO / "tests" / "server" / "data"
# Highlighting children that start slowly (as on a loaded host), or never answer.
SLOW_START = ("import runpy, time; time.sleep(8); "
              "runpy.run_module('kernelscope.server.web.highlight_child', run_name='__main__')")
HANGS = "import sys, time; sys.stdout.buffer.write(bytes(8)); sys.stdout.flush(); time.sleep(600)"

# The fake worker runs the snippet with sys.stdout on the event channel (the real compiler
# redirects it): these snippets write straight to that channel, as a forger who found it
# would, to reach the server's caps.
CHANNEL = (
    "import json, sys\n"
    "emit = lambda line: (sys.stdout.write(line + '\\n'), sys.stdout.flush())\n"
    "def event(stage, **data):\n"
    "    emit(json.dumps({'schema': 1, 'seq': 0, 'stage': stage, 'ms': 0, 'data': data}))\n"
)


def test_after_is_clamped_to_the_stream(client: FlaskClient) -> None:
    """5: `after=-1000000000000` replayed a finished 7 KB trace endlessly (99 MB in 5 s)."""
    job_id = submit(client, "x = 1\n")
    events = client.get(f"/api/jobs/{job_id}/events?format=ndjson").get_data(as_text=True)
    count = len([line for line in events.splitlines() if line.strip()])
    for after in ("-1000000000000", "-5", "-1"):
        response = client.get(f"/api/jobs/{job_id}/events.ndjson?after={after}")
        body = response.get_data(as_text=True)  # a replay that never ended would hang here
        assert len([line for line in body.splitlines() if line.strip()]) == count, after
    assert client.get(f"/api/jobs/{job_id}/events?after=999999").status_code == 204
    huge = client.get(f"/api/jobs/{job_id}/events?after={'9' * 5000}")
    assert huge.status_code == 400 and "seq" in huge.get_json()["error"]


def test_one_huge_event_stops_the_job(make_app: AppFactory) -> None:
    """6: one 15 MB forged event raised the server from 50 to 463 MB, for 15 minutes."""
    client = make_app(EVENT_LIMIT_KB=64, JOB_TIMEOUT_S=20).test_client()
    code = CHANNEL + "event('capture', blob='x' * (1 << 20))\n"
    events = compile_events(client, code)
    error = first_error(events)
    assert error["kind"] == "sandbox" and "larger than 64 KiB" in error["message"]
    assert all(len(json.dumps(e)) < 64 * 1024 for e in events)


def test_an_event_without_a_newline_is_capped_too(make_app: AppFactory) -> None:
    """6: a line that never ends was buffered up to the whole output limit."""
    client = make_app(EVENT_LIMIT_KB=64, JOB_TIMEOUT_S=20).test_client()
    code = "import sys\nsys.stdout.write('{' + 'x' * (1 << 20))\nsys.stdout.flush()\n"
    code += "import time\ntime.sleep(30)\n"
    error = first_error(compile_events(client, code))
    assert error["kind"] == "sandbox" and "larger than 64 KiB" in error["message"]


def test_event_count_and_trace_size_are_capped(make_app: AppFactory) -> None:
    """6: no cap on the number of events or on a trace's size."""
    client = make_app(EVENT_COUNT_LIMIT=50, TRACE_LIMIT_MB=1, JOB_TIMEOUT_S=20).test_client()
    many = CHANNEL + "for _ in range(500):\n    event('lowering')\n"
    events = compile_events(client, many)
    assert "more than 50 events" in first_error(events)["message"] and len(events) <= 52
    big = CHANNEL + "for _ in range(40):\n    event('codegen', k='y' * 60000)\n"
    events = compile_events(client, big)
    assert "larger than 1 MiB" in first_error(events)["message"]
    trace = client.get(f"/api/traces/{events[-1]['data']['trace_id']}")
    assert len(trace.get_data()) < 1.2 * (1 << 20)


def test_nan_and_infinity_in_events_become_null(make_app: AppFactory) -> None:
    """9: NaN/Infinity in an event broke the permalink page (JSON.parse rejects them)."""
    client = make_app(BACK_CMD=None).test_client()  # one process: the channel is published
    line = '{"schema":1,"seq":0,"stage":"profile","ms":1,"data":{"speedup":NaN,"x":[Infinity]}}'
    surrogate = '{"stage":"run","data":{"v":"\\ud800"}}'
    code = CHANNEL + f"emit({line!r})\nemit({surrogate!r})\n"
    events = compile_events(client, code)
    profile = next(e for e in events if e["stage"] == "profile")
    assert profile["data"] == {"speedup": None, "x": [None]}
    run = next(e for e in events if e["stage"] == "run")
    assert run["data"]["v"] == "\ufffd"
    trace = client.get(f"/api/traces/{events[-1]['data']['trace_id']}")
    text = trace.get_data(as_text=True)
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the trace"))


def test_sanitize_refuses_depth_and_fixes_values() -> None:
    assert sanitize({"a": [float("nan"), "\udfff", 1]}, 8) == {"a": [None, "\ufffd", 1]}
    deep: object = 1
    for _ in range(100):
        deep = [deep]
    with pytest.raises(ValueError):
        sanitize(deep, 64)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"code": "x = \\ud800"}', "lone surrogate"),
        ('{"code": "x = 1", "entry": "f\\udc00"}', "lone surrogate"),
        ('{"code": "x = 1", "options": {"fusion": NaN}}', "NaN"),
        ('{"code": "x = 1", "n": Infinity}', "Infinity"),
        ('{"code": "x = 1", "n": 1e999}', "too large"),
        pytest.param(
            '{"code": "x = 1", "n": ' + "[" * 100000 + "]" * 100000 + "}",
            "nested too deeply",
            id="100k-deep",
        ),
        ('{"code": "x = 1", "n": ' + "[" * 20 + "]" * 20 + "}", "nested too deeply"),
        (b'{"code": "\xff"}', "UTF-8"),
    ],
)
def test_hostile_json_gets_a_clear_400(client: FlaskClient, body: str | bytes, words: str) -> None:
    """9: a lone surrogate crashed the supervisor (no trace stored); 100k-deep JSON gave 500."""
    response = client.post("/api/compile", data=body, content_type="application/json")
    assert response.status_code == 400, response.get_data()
    assert words in response.get_json()["error"]


@pytest.mark.parametrize("entry", ["a\n", "a\nimport os", "a.", ".a", "a..b", "1a", "a b", "ä"])
def test_entry_name_is_fully_matched(client: FlaskClient, entry: str) -> None:
    """9: `entry: "a\\n"` passed the name check (`$` matches before a final newline)."""
    response = client.post("/api/compile", json={"code": "x = 1", "entry": entry})
    assert response.status_code == 400
    assert "'entry' must be a Python name" in response.get_json()["error"]


def test_dotted_entry_names_still_pass(client: FlaskClient) -> None:
    response = client.post("/api/compile", json={"code": "x = 1", "entry": "Net.forward"})
    assert response.status_code == 202


def test_highlight_is_size_limited(client: FlaskClient) -> None:
    """9: 8 x 1 MiB /api/highlight requests took 47 s each in the server."""
    body = {"code": "x = 1\n" * 50000, "language": "python"}  # 300 KB
    response = client.post("/api/highlight", json=body)
    assert response.status_code == 413 and "limit 256 KiB" in response.get_json()["error"]
    assert client.post("/api/highlight", json={"code": "x = 1\n"}).status_code == 200


def test_highlight_runs_in_a_child_process_with_a_deadline(make_app: AppFactory) -> None:
    """Issue 30, 1: the LLVM lexer is super-linear, and 48 KiB of `a.a.a` took 33 s in the
    web tier's greenlet. Now a child process highlights, and is killed at the deadline."""
    app = make_app(HIGHLIGHT_TIMEOUT_S=1)
    client = app.test_client()
    slow = client.post("/api/highlight", json={"code": "a." * 24000, "language": "llvm"})
    assert slow.status_code == 422 and "too long" in slow.get_json()["error"]
    # ... and a fresh child answers the next request.
    fine = client.post("/api/highlight", json={"code": "%x = add i32 1, 2\n", "language": "llvm"})
    assert fine.status_code == 200 and 'id="L-1"' in fine.get_json()["html"]


def _highlight_from(app: Flask, clients: int, code: str) -> list[int]:
    """POST /api/highlight from `clients` addresses at once; the statuses, in order."""
    results: dict[int, int] = {}

    def one(i: int) -> None:
        client = app.test_client()
        client.environ_base["REMOTE_ADDR"] = f"10.0.0.{i}"
        body = {"code": code, "language": "python"}
        results[i] = client.post("/api/highlight", json=body).status_code

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return [results.get(i, 0) for i in range(clients)]


def test_highlights_from_several_clients_run_beside_each_other(make_app: AppFactory) -> None:
    """Four clients, two children: each is answered (two wait their turn), by the two."""
    app = make_app(HIGHLIGHT_PROCS=2)
    assert _highlight_from(app, 4, "def f(x):\n    return x\n" * 1000) == [200] * 4
    assert _pool(app).started == 2


def test_a_request_waits_for_children_still_starting(
        make_app: AppFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request waited 5 s for an idle child, and two children starting on a loaded host
    took longer: [503, 503, 200, 200] from four clients. Now it waits its turn, however long
    the children take to start (a child here takes 8 s)."""
    monkeypatch.setattr(hlpool, "CHILD", [sys.executable, "-c", SLOW_START])
    app = make_app(HIGHLIGHT_PROCS=1)
    assert _highlight_from(app, 2, "x = 1\n") == [200, 200]
    assert _pool(app).started == 1


def test_the_server_starts_its_highlighting_children_ahead(make_app: AppFactory) -> None:
    """`kernelscope serve` warms the pool: the first highlights start no child."""
    app = make_app(HIGHLIGHT_PROCS=2)
    _pool(app).warm().join(120)
    assert _pool(app).started == 2
    assert _highlight_from(app, 2, "x = 1\n") == [200, 200]
    assert _pool(app).started == 2


def test_only_so_many_highlights_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `waiting` requests waiting for a child, the next is refused at once (503); the
    child that does not answer is killed at its deadline (422)."""
    monkeypatch.setattr(hlpool, "CHILD", [sys.executable, "-c", HANGS])
    pool = hlpool.HighlightPool(1, 2.0, 1024, str(REPO), waiting=1)
    answers: dict[str, int] = {}

    def one(client: str) -> None:
        try:
            pool.highlight("x = 1\n", "python", client)
            answers[client] = 200
        except hlpool.HighlightRefused as exc:
            answers[client] = exc.status

    first = threading.Thread(target=one, args=("a",))
    first.start()
    assert wait_until(lambda: pool.started == 1, 60)
    second = threading.Thread(target=one, args=("b",))
    second.start()
    assert wait_until(lambda: pool._waiters == 1, 60)
    one("c")
    assert answers == {"c": 503}
    first.join(120)
    second.join(120)
    pool.close()
    assert answers == {"a": 422, "b": 422, "c": 503}


def _pool(app: Flask) -> hlpool.HighlightPool:
    pool = state(app).highlighter
    assert pool is not None
    return pool


def test_the_lower_stages_of_a_large_kernel_still_highlight(client: FlaskClient) -> None:
    """The per-language caps leave room for a large kernel's LLVM IR and PTX: a layer norm
    with GELU over rows of 8192, compiled for sm_90 (tests/server/data/README.md), twice
    over (444 KiB of LLVM IR) and four times (368 KiB of PTX)."""
    for name, language, times in (("ln_gelu_8192.llir.gz", "llvm", 2),
                                  ("ln_gelu_8192.ptx.gz", "ptx", 4)):
        text = gzip.decompress((DATA / name).read_bytes()).decode() * times
        response = client.post("/api/highlight", json={"code": text, "language": language})
        assert response.status_code == 200, response.get_json()
        html = response.get_json()["html"]
        assert f'id="L-{len(text.splitlines())}"' in html


SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def csp_directives(value: str) -> dict[str, list[str]]:
    parts = [p.split() for p in value.split(";") if p.strip()]
    return {p[0]: p[1:] for p in parts}


@pytest.mark.parametrize("url", ["/", "/api/health", "/api/samples", "/webui/js/main.js", "/nope"])
def test_every_response_has_the_security_headers(client: FlaskClient, url: str) -> None:
    """9: no CSP, nosniff or frame-blocking headers (`/t/<id>` rendered in a foreign iframe)."""
    response = client.get(url)
    for key, value in SECURITY_HEADERS.items():
        assert response.headers.get(key) == value, (url, key)
    csp = csp_directives(response.headers["Content-Security-Policy"])
    assert csp["frame-ancestors"] == ["'none'"] and csp["object-src"] == ["'none'"]
    assert csp["default-src"] == ["'self'"] and csp["base-uri"] == ["'none'"]
    assert "'unsafe-inline'" not in csp["script-src"] and "'unsafe-eval'" not in csp["script-src"]


def test_the_page_nonce_matches_its_scripts_and_changes(client: FlaskClient) -> None:
    pages = [client.get("/") for _ in range(2)]
    nonces = []
    for page in pages:
        assert page.headers["Cache-Control"] == "no-store"
        csp = csp_directives(page.headers["Content-Security-Policy"])
        nonce = next(s for s in csp["script-src"] if s.startswith("'nonce-"))[7:-1]
        html = page.get_data(as_text=True)
        scripts = re.findall(r"<script\b[^>]*>", html)
        assert scripts and all(f'nonce="{nonce}"' in tag for tag in scripts)
        nonces.append(nonce)
    assert nonces[0] != nonces[1] and len(nonces[0]) >= 16


def test_the_cdn_script_is_pinned_with_the_vendored_copys_hash(client: FlaskClient) -> None:
    """9: cytoscape came from the CDN without an integrity hash."""
    import base64
    import hashlib

    page = client.get("/")
    csp = csp_directives(page.headers["Content-Security-Policy"])
    cdn = [s for s in csp["script-src"] if s.startswith("https:")]
    libs = (REPO / "webui" / "js" / "libs.js").read_text()
    version = re.search(r'CYTOSCAPE_VERSION = "([^"]+)"', libs)
    assert version and cdn == [
        f"https://cdn.jsdelivr.net/npm/cytoscape@{version.group(1)}/dist/cytoscape.esm.min.mjs"
    ]
    importmap = re.search(r'<script type="importmap"[^>]*>(.*?)</script>', page.get_data(True))
    assert importmap, "no import map carrying the CDN script's integrity"
    vendored = (REPO / "webui" / "vendor" / "cytoscape.esm.min.js").read_bytes()
    digest = base64.b64encode(hashlib.sha384(vendored).digest()).decode()
    assert json.loads(importmap.group(1)) == {"integrity": {cdn[0]: f"sha384-{digest}"}}


def test_serve_help_lists_every_flag_the_docs_name() -> None:
    """9: `kernelscope serve --help` lacked --max-jobs/--timeout/--isolation."""
    docs = (REPO / "docs" / "server.md").read_text()
    usage = re.findall(r"^kernelscope serve .*?(?=\n\S|\n\n)", docs, flags=re.M | re.S)
    named = set(re.findall(r"--[a-z][a-z-]*", " ".join(usage)))
    assert {"--max-jobs", "--timeout", "--isolation"} <= named
    done = subprocess.run(
        [sys.executable, "-m", "kernelscope", "serve", "--help"],
        capture_output=True, text=True, timeout=60, cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    listed = set(re.findall(r"--[a-z][a-z-]*", done.stdout))
    assert named <= listed, named - listed

