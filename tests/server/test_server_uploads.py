"""`POST /api/traces`: a recorded run's files become a stored trace with a permalink.

Good files are stored (the same files, the same id); an oversized body is refused with 413
before it is read; malformed files are refused with a 400 that names the file and the
field, and nothing is stored; files from other versions of the same format are stored
with those versions; an unknown format version is refused. Through all of it the server
keeps answering and earlier traces stay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from attack_support import many_graphs
from flask.testing import FlaskClient
from own_run_support import files_of, record_run, with_versions
from server_support import AppFactory, down_store, state


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    return files_of(record_run(tmp_path_factory.mktemp("upload")))


def _upload(client: FlaskClient, files: list[dict[str, Any]]) -> Any:
    return client.post("/api/traces", json={"files": files})


def _count(client: FlaskClient) -> int:
    return int(client.get("/api/health").get_json()["traces"])


def test_good_upload_is_stored_with_a_permalink(client: FlaskClient,
                                                files: list[dict[str, str]]) -> None:
    answer = _upload(client, files)
    assert answer.status_code == 201, answer.get_json()
    body = answer.get_json()
    assert body["url"] == f"/t/{body['id']}" and body["graphs"] == 4
    trace = client.get(f"/api/traces/{body['id']}").get_json()
    stages = [e["stage"] for e in trace["events"]]
    assert stages[:2] == ["source", "capture"] and stages[-1] == "done"
    assert trace["events"][-1]["data"]["trace_id"] == body["id"]
    assert all(e["origin"] == "snippet" for e in trace["events"])
    assert trace["events"][-1]["data"]["isolated"] is False
    assert "def f(x):" in trace["code"]
    assert trace["options"]["recorded"]["recompiles"] == 2
    assert trace["options"]["recorded"]["config"] == {"dynamo.recompile_limit": "4"}
    assert client.get(body["url"]).status_code == 200
    again = _upload(client, files).get_json()
    assert again["id"] == body["id"] and _count(client) == 1


def test_oversized_upload_is_refused_before_it_is_read(make_app: AppFactory,
                                                       files: list[dict[str, str]]) -> None:
    client = make_app(UPLOAD_LIMIT_MB=1).test_client()
    assert _upload(client, files).status_code == 201  # a small run fits
    big = [*files, {"name": "pad.json", "text": " " * (2 << 20)}]
    answer = _upload(client, big)
    assert answer.status_code == 413
    assert "error" in answer.get_json()
    assert client.get("/api/health").status_code == 200 and _count(client) == 1


def test_the_upload_cap_is_its_own(client: FlaskClient, files: list[dict[str, str]]) -> None:
    """A run larger than a compile request's 1 MiB cap still opens (UPLOAD_LIMIT_MB)."""
    padded = [dict(f) for f in files]
    record = json.loads(padded[0]["text"])
    record["code"] += "\n" + "# padding\n" * 150_000
    padded[0]["text"] = json.dumps(record)
    assert len(json.dumps({"files": padded})) > 1 << 20
    assert _upload(client, padded).status_code == 201


def _broken(files: list[dict[str, str]], change: Any) -> list[dict[str, str]]:
    out = [dict(f) for f in files]
    first = next(f for f in out if f["name"] != "run.json")
    first["text"] = change(json.loads(first["text"]))
    return out


def _set_kernels(r: dict[str, Any]) -> str:
    r["stages"]["scheduling"]["kernels"] = {"evil": True}
    return json.dumps(r)


@pytest.mark.parametrize(("body", "message"), [
    ({}, "'files' is required"),
    ({"files": "all of them"}, "'files' is required"),
    ({"files": [{"name": "a.json"}]}, "'text' must be the file's text"),
    ({"files": [{"name": "a.json", "text": "{nope"}]}, "a.json: not JSON"),
    ({"files": [{"name": "a.json", "text": '{"format": "other"}'}]}, "not a Kernelscope"),
    ({"files": [{"name": "a.json", "text": "[" * 80 + "]" * 80}]}, "nested deeper"),
    ({"files": [{"name": "a.json", "text": '{"x": NaN}'}]}, "not JSON"),
])
def test_malformed_uploads_are_refused_clearly(client: FlaskClient, body: dict[str, Any],
                                               message: str) -> None:
    answer = client.post("/api/traces", json=body)
    assert answer.status_code == 400
    assert message in answer.get_json()["error"]
    assert _count(client) == 0


def test_a_stage_outside_the_schema_is_refused_naming_the_file(
        client: FlaskClient, files: list[dict[str, str]]) -> None:
    assert _upload(client, files).status_code == 201
    broken = _broken(files, _set_kernels)
    answer = _upload(client, broken)
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    name = next(f["name"] for f in broken if f["name"] != "run.json")
    assert name in error and "scheduling stage does not follow the event schema" in error
    assert "kernels" in error
    assert _upload(client, [{"name": "x", "text": "{}"}]).status_code == 400
    assert client.get("/api/health").status_code == 200 and _count(client) == 1


def test_not_json_body_is_refused(client: FlaskClient) -> None:
    answer = client.post("/api/traces", data=b"\xff\xfe", content_type="application/json")
    assert answer.status_code == 400 and "UTF-8" in answer.get_json()["error"]
    answer = client.post("/api/traces", data=b"files", content_type="text/plain")
    assert answer.status_code == 400 and "JSON body" in answer.get_json()["error"]


def test_snippet_payloads_are_conformed(client: FlaskClient,
                                        files: list[dict[str, str]]) -> None:
    def plant(r: dict[str, Any]) -> str:
        r["stages"]["capture"]["verified_by"] = "the server"
        r["stages"]["capture"]["nodes"][0]["speedup"] = 1000
        return json.dumps(r)

    ident = _upload(client, _broken(files, plant)).get_json()["id"]
    capture = client.get(f"/api/traces/{ident}").get_json()["events"][1]["data"]
    assert all("verified_by" not in g for g in capture["graphs"])
    assert all("speedup" not in n for g in capture["graphs"] for n in g["nodes"])


def test_other_versions_are_stored_with_theirs(client: FlaskClient,
                                               files: list[dict[str, str]]) -> None:
    other = with_versions(files, torch="2.9.1+cu128", kernelscope="0.0.7")
    answer = _upload(client, other)
    assert answer.status_code == 201
    source = client.get(f"/api/traces/{answer.get_json()['id']}").get_json()["events"][0]
    assert source["data"]["versions"]["torch"] == "2.9.1+cu128"
    assert source["data"]["versions"]["kernelscope"] == "0.0.7"


def test_unknown_format_version_is_refused(client: FlaskClient,
                                           files: list[dict[str, str]]) -> None:
    answer = _upload(client, with_versions(files, version=2, kernelscope="0.3.0"))
    assert answer.status_code == 400
    error = answer.get_json()["error"]
    assert "format version 2 is unknown" in error and "written by kernelscope 0.3.0" in error
    assert _count(client) == 0


def test_the_store_only_grows(app: Any, files: list[dict[str, str]], tmp_path: Path) -> None:
    """An upload never replaces a stored trace: the same content is the same row."""
    client = app.test_client()
    ident = _upload(client, files).get_json()["id"]
    before = state(app).store.get(ident)
    _upload(client, with_versions(files, torch="2.0.0"))
    assert state(app).store.get(ident) == before and _count(client) == 2


def test_one_upload_is_opened_at_a_time(app: Any, files: list[dict[str, str]]) -> None:
    """Opening runs in a child process, UPLOAD_SLOTS at a time: beyond that, 503."""
    from kernelscope.server.web.uploads import SLOT

    client = app.test_client()
    slot = app.extensions[SLOT]
    assert slot.acquire(blocking=False)
    try:
        answer = _upload(client, files)
        assert answer.status_code == 503 and "busy" in answer.get_json()["error"]
        assert answer.headers["Retry-After"]
    finally:
        slot.release()
    assert _upload(client, files).status_code == 201


def test_an_upload_that_takes_too_long_is_stopped(make_app: AppFactory,
                                                  files: list[dict[str, str]]) -> None:
    client = make_app(UPLOAD_TIMEOUT_S=0.05).test_client()
    answer = _upload(client, files)
    assert answer.status_code == 413 and "took longer than" in answer.get_json()["error"]
    assert client.get("/api/health").status_code == 200 and _count(client) == 0
    # ... and it still answers (the body's shape is checked in the child too, which the
    # 0.05 s deadline stops as well).
    assert _upload(client, files[:0]).status_code in (400, 413)


def test_notices_are_capped_in_length_and_count(files: list[dict[str, str]]) -> None:
    """Issue 30, attack 3: a 1 MiB file name was quoted in a notice per graph."""
    from kernelscope.compiler.trace.reader import MAX_NOTICES, NOTICE_CHARS, open_files

    graphs = many_graphs(files, 80, 1 << 20)
    opened = open_files([(f["name"], f["text"].encode()) for f in graphs])
    assert len(opened.notices) == MAX_NOTICES + 1 and "more notices" in opened.notices[-1]
    assert all(len(n) <= NOTICE_CHARS for n in opened.notices)
    assert len(json.dumps(opened.options["recorded"])) < 64 * 1024


def test_an_opened_trace_over_the_trace_limit_is_refused_clearly(
        make_app: AppFactory, files: list[dict[str, str]]) -> None:
    client = make_app(TRACE_LIMIT_MB=1).test_client()
    answer = _upload(client, many_graphs(files, 300, 10))  # 1.4 MiB of events
    assert answer.status_code == 400, answer.get_json()
    assert "over this server's trace limit of 1 MiB" in answer.get_json()["error"]
    assert _count(client) == 0
    assert _upload(client, files).status_code == 201


def _record(kind: str, meta: Any, payload: str | None = None, cid: int = 0) -> str:
    head = {kind: meta, "frame_id": 0, "frame_compile_id": cid}
    if payload is not None:
        head["has_payload"] = "x"
    line = "V1206 02:12:58.633000 27343 site-packages/torch/x.py:1] " + json.dumps(head)
    return line + "".join(f"\n\t{p}" for p in (payload or "").splitlines()) \
        if payload is not None else line


def test_a_torch_trace_log_is_opened_by_the_upload_child(client: FlaskClient) -> None:
    """One uploaded file that is no .json: a TORCH_TRACE log, read in the child (a small
    one written here in the log's own format; tests/core/test_torch_trace.py reads real
    ones)."""
    graph = ('class GraphModule(torch.nn.Module):\n    def forward(self, arg0_1: "f32[8][1]cpu"):\n'
             '        # File: /u/m.py:4 in f, code: return x.sin()\n'
             '        sin: "f32[8][1]cpu" = torch.ops.aten.sin.default(arg0_1)\n'
             '        return (sin,)')
    module = ("cpp_fused_sin_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r'''\n"
              "extern \"C\" void kernel(const float* in_ptr0, float* out_ptr0) {}\n''')\n"
              "def call(self, args):\n    arg0_1, = args\n"
              "    buf0 = empty_strided_cpu((8, ), (1, ), torch.float32)\n"
              "    cpp_fused_sin_0(arg0_1, buf0)\n    return (buf0, )\n"
              "def get_args():\n"
              "    arg0_1 = rand_strided((8, ), (1, ), device='cpu', dtype=torch.float32)\n")
    log = "\n".join([
        _record("str", ["/u/m.py", 1]),
        _record("dynamo_start", {"stack": [{"line": 3, "name": "f", "filename": 1}]}),
        _record("aot_inference_graph", {}, graph),
        _record("inductor_output_code", {"filename": "/tmp/x.py"}, module),
        _record("compilation_metrics", {"co_name": "f", "entire_frame_compile_time_s": 1.5}),
        _record("something_new", {}, "kept, not dropped"),
    ]) + "\n"
    answer = _upload(client, [{"name": "dedicated_log_torch_trace_x.log", "text": log}])
    assert answer.status_code == 201, answer.get_json()
    trace = client.get(f"/api/traces/{answer.get_json()['id']}").get_json()
    data = {e["stage"]: e["data"] for e in trace["events"]}
    assert list(data) == ["source", "capture", "codegen", "inductor", "done"]
    [compiled] = data["capture"]["compiles"]
    assert compiled["metrics"]["entire_frame_compile_time_s"] == 1.5
    assert any(r["name"] == "something_new" and r["payload"] == "kept, not dropped"
               and not r["known"] for r in compiled["records"])
    [kernel] = data["inductor"]["kernels"]
    assert kernel["name"] == "cpp_fused_sin_0" and kernel["bytes"] == 64
    assert data["capture"]["graphs"][0]["nodes"][1]["line"] == 4
    assert "the log holds its line numbers" in trace["code"]


def test_the_web_tier_stores_an_uploads_texts_undecoded(
        app: Any, files: list[dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """The upload child prepares the trace as the store writes it (id, events' text, parts'
    texts): the web tier, which serves every stream, neither decodes the events (they were
    decoded there, 1.4 MB for 300 graphs) nor encodes them for the store (one json.dumps
    of them whole, and again for the id), which put its health answers near 0.5 s."""
    import kernelscope.server.store.rows as rows
    import kernelscope.server.web.uploads as uploads

    decoded: list[int] = []
    real_loads = uploads.loads_stepwise

    def loads(text: str | bytes) -> Any:
        decoded.append(len(text))
        return real_loads(text)

    def never(*_: Any) -> Any:
        raise AssertionError("the web tier prepared the upload's events itself")

    monkeypatch.setattr(uploads, "loads_stepwise", loads)
    monkeypatch.setattr(rows, "prepared", never)
    client = app.test_client()
    body = {"files": many_graphs(files, 300, 10)}
    answer = client.post("/api/traces", json=body)
    assert answer.status_code == 201, answer.get_json()
    assert max(decoded) < 64 * 1024, decoded
    ident = answer.get_json()["id"]
    monkeypatch.undo()
    trace = client.get(f"/api/traces/{ident}").get_json()
    assert trace["events"][-1]["data"]["trace_id"] == ident
    assert len(trace["events"][1]["data"]["graphs"]) == 300
    # The same id as the trace stored in this process from the same files (a big trace in
    # parts goes the same way: test_server_parts.py).
    from kernelscope.server.web.uploads import store_files

    again, _ = store_files(state(app).store, [(f["name"], f["text"].encode())
                                              for f in body["files"]])
    assert again == ident


def test_a_prepared_trace_is_spooled_while_the_database_is_down(
        tmp_path: Path, files: list[dict[str, str]]) -> None:
    """An upload's prepared texts, spooled as given while the database is down, read back
    at once and written to the database when it returns, under the same id."""
    from kernelscope.compiler.trace.reader import open_files
    from kernelscope.server.store.rows import prepare
    from kernelscope.server.store.spool import SpoolingStore
    from kernelscope.server.web.uploads import conformed

    read = conformed(open_files([(f["name"], f["text"].encode()) for f in files]))
    trace = prepare(read.code, read.options, read.events, True)
    inner = down_store(tmp_path / "t.sqlite3")
    spool = SpoolingStore(inner, tmp_path / "spool")
    assert spool.put_prepared(trace) == trace.ident and spool.spooled() == [trace.ident]
    stored = spool.get(trace.ident)
    assert stored is not None and stored["events"] == json.loads(trace.events)
    inner.down = False
    assert spool.flush(force=True) == 1 and spool.spooled() == []
    row = inner.get(trace.ident)
    assert row is not None and row["events"] == json.loads(trace.events)
    assert row["code"] == read.code and row["options"] == read.options


STREAM_BODIES = [
    b'{"files": [{"name": "a.json", "text": "{\\"x\\": 1}"}, '
    b'{"name": "b.json", "text": "\xc3\xa9\xe2\x82\xac"}]}',
    b'  {"pad": [1, 2.5e3, true, null, {"k": "v"}], "files": [{"name": "a.json", "text": ""}]}  ',
    b'{"files": [{"name": "a.json", "text": "x"}], "files": [{"name": "b.json", "text": "y"}]}',
    b'{"files": [{"name": "a.json", "text": "x"},]}', b'{"files": [{"name": "a.json"},], }',
    b'{"files": [], "n": 12345678}', b'{"n": 12345678, "files": []}', b'{}', b'{"files": {}}',
    b'[]', b'12', b'', b'   ', b'"files"', b'{"files": [{"name": "a.json", "text": NaN}]}',
    b'{"files": [{"name": "a.json", "text": "x"}]} extra', b'{"files": [1e400]}',
    b'{"files": [{"name": "a.json", "text": "\\ud800"}]}', b'{"files": [{"name": "\xff"}]}',
    b'{"files": [' + b'[' * 20 + b']' * 20 + b']}', b'{"x": ' + b'[' * 5000 + b']' * 5000 + b'}',
    b'{"files": [{"name": "a.json", "text": "x"}]', b'{"files" [1]}', b'{1: 2}',
    b'\xef\xbb\xbf{"files": []}', b'{"files": [{"name": "a.json", "text": "x"}]}\xff',
]


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
def test_the_upload_child_reads_a_body_as_it_arrives_as_parse_request_would(
        monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The child takes each file as soon as it is in, never the body whole: the same files,
    or the same refusal in the same words, as decoding the body whole, however the body's
    bytes are cut (a multi-byte character or a number across two reads)."""
    import io

    from kernelscope.compiler.trace.reader import TraceRefused
    from kernelscope.server.jobs.inputs import BadInput, parse_request
    from kernelscope.server.web import upload_child
    from kernelscope.server.web.uploads import checked_files

    monkeypatch.setattr(upload_child, "CHUNK", chunk)

    def outcome(read: Any) -> Any:
        try:
            return read()
        except (BadInput, TraceRefused) as exc:
            return type(exc).__name__, str(exc)

    for body in STREAM_BODIES:
        whole = outcome(lambda: checked_files(parse_request(body)))
        streamed = outcome(lambda: upload_child.read_files(io.BytesIO(body)))
        assert streamed == whole, body[:80]


def test_the_upload_child_never_holds_the_body_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three 1 MiB files: the text held at once is about one file's (the body's, before)."""
    import io

    from kernelscope.server.web import upload_child

    texts: list[int] = []
    real = upload_child._Body.more

    def more(self: Any, least: int = 1) -> bool:
        found = real(self, least)
        texts.append(len(self.text))
        return bool(found)

    monkeypatch.setattr(upload_child._Body, "more", more)
    files = [{"name": f"{i}.json", "text": "x" * (1 << 20)} for i in range(3)]
    body = json.dumps({"files": files}).encode()
    assert [len(t) for _, t in upload_child.read_files(io.BytesIO(body))] == [1 << 20] * 3
    assert max(texts) < 2.5 * (1 << 20) < len(body), (max(texts), len(body))
