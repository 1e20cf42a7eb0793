"""Your own run from the command line: `kernelscope run script.py args` records every
torch.compile of the script (compile, recompile, graph break, the call site and the
torch.compile call behind each compile; other backends listed, not recorded), and
`kernelscope open DIR` stores the directory as one trace with a permalink.
compiler/trace/reader.py refuses files outside the format, naming the file."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from ks_helpers import REPO

from kernelscope.compiler.events.check import event_errors
from kernelscope.compiler.trace.reader import TraceRefused, open_files, read_dir

SCRIPT = """import sys
import torch

def f(x):
    y = torch.relu(x + 1)
    print("breaks the graph", file=sys.stderr)
    return y * 2

def g(x):
    return torch.sin(x)

cf = torch.compile(f, backend="kernelscope")
cf(torch.randn(8))
cf(torch.randn(8, dtype=torch.float64))
cg = torch.compile(g)
cg(torch.randn(4))
print("args", sys.argv[1:])
sys.exit(3)
"""
ENV = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": "/tmp"}


def kernelscope(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernelscope", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, env=ENV)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    tmp = tmp_path_factory.mktemp("own-run")
    script = tmp / "mine.py"
    script.write_text(SCRIPT)
    out = tmp / "trace"
    proc = kernelscope("run", "--trace-dir", str(out), str(script), "one", "--two")
    return out, proc


def _graph_records(out: Path) -> list[dict[str, Any]]:
    records = [json.loads(p.read_text()) for p in out.glob("*_compile_*.json")]
    return sorted(records, key=lambda r: r["seq"])


def test_run_records_every_compile_with_its_call_sites(recorded: tuple[Path, Any]) -> None:
    out, proc = recorded
    assert proc.returncode == 3, proc.stderr[-3000:]  # the script's own exit status
    assert "args ['one', '--two']" in proc.stdout
    records = _graph_records(out)
    # f breaks at its print: two regions, each compiled again for float64.
    assert [r["compile_id"] for r in records] == ["0/0", "1/0", "0/1", "1/1"]
    assert [r["recompile"] for r in records] == [False, False, True, True]
    assert "dtype" in records[2]["reasons"][0]
    assert records[0]["graph_break_site"]["line"] == 6
    assert records[0]["call_site"]["line"] == 13 and records[2]["call_site"]["line"] == 14
    # The torch.compile call behind every compile: line 12, call 0.
    for r in records:
        assert r["compile_call"]["call"] == 0 and r["compile_call"]["site"]["line"] == 12
        assert set(r["ms"]) == {"lowering", "scheduling", "memory", "codegen", "compile"}
        assert all(v > 0 for v in r["ms"].values())
        assert r["config"] == {}  # the script changed no torch setting
    run = json.loads((out / "run.json").read_text())
    assert run["exit"] == 3 and run["argv"][1:] == ["one", "--two"]
    calls = [(c["site"]["line"], c["backend"], c["recorded"]) for c in run["calls"]]
    assert calls == [(12, "kernelscope", True), (15, "inductor", False)]
    assert "uses backend 'inductor': not recorded" in proc.stderr
    assert f"kernelscope open {out}" in proc.stderr


def test_open_assembles_one_trace_that_follows_the_schema(recorded: tuple[Path, Any]) -> None:
    out, _ = recorded
    opened = open_files(read_dir(out))
    stages = [e["stage"] for e in opened.events]
    assert stages == ["source", "capture", "lowering", "scheduling", "memory", "codegen",
                      "compile", "done"]
    for event in opened.events:
        assert event_errors(event) == [], event["stage"]
    ms = {e["stage"]: e["ms"] for e in opened.events}
    summed = sum(r["ms"]["lowering"] for r in _graph_records(out))
    assert ms["lowering"] == pytest.approx(summed, abs=0.01) and ms["capture"] == 0.0
    capture = opened.events[1]["data"]
    assert [g["id"] for g in capture["graphs"]] == [0, 1, 2, 3]
    assert [c["line"] for c in capture["compiles"]] == [13, 6, 14, 6]
    assert capture["graph_breaks"][0]["line"] == 6
    assert "def f(x):" in opened.code
    recorded_ = opened.options["recorded"]
    assert recorded_["recompiles"] == 2 and recorded_["graph_breaks"] == 2
    assert "trace_dir" not in opened.options
    assert any("'inductor': not recorded" in n for n in opened.notices)


def test_open_stores_it_with_a_permalink(recorded: tuple[Path, Any], tmp_path: Path) -> None:
    out, _ = recorded
    db = tmp_path / "traces.sqlite3"
    proc = kernelscope("open", str(out), "--db", str(db), "--no-serve", "--no-browser",
                       "--server", "http://127.0.0.1:9")
    assert proc.returncode == 2 and "no Kernelscope server answers" in proc.stderr
    proc = kernelscope("open", str(out), "--db", str(db), "--no-serve", "--no-browser")
    assert proc.returncode == 0, proc.stderr
    ident = proc.stdout.strip().rsplit("/t/", 1)[1]
    from kernelscope.server.store.sqlite import TraceStore

    trace = TraceStore(db).get(ident)
    assert trace is not None and len(trace["events"][1]["data"]["graphs"]) == 4
    assert trace["events"][-1]["data"]["trace_id"] == ident


def test_open_uploads_to_a_running_server(recorded: tuple[Path, Any], tmp_path: Path) -> None:
    from werkzeug.serving import make_server

    from kernelscope.server import create_app

    app = create_app({"DATABASE": str(tmp_path / "traces.sqlite3"), "WARM_POOL": 0,
                      "KERNEL_CACHE": "", "SCRATCH_ROOT": str(tmp_path)})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        proc = kernelscope("open", str(recorded[0]), "--server", url, "--no-browser")
        assert proc.returncode == 0, proc.stderr
        permalink = proc.stdout.strip()
        assert permalink.startswith(f"{url}/t/")
        trace = app.extensions["kernelscope"].store.get(permalink.rsplit("/", 1)[1])
        assert trace is not None and trace["options"]["recorded"]["graphs"] == 4
    finally:
        server.shutdown()
        thread.join(timeout=5)
        app.extensions["kernelscope"].jobs.shutdown()


def test_all_backends_routes_other_backends_here(tmp_path: Path) -> None:
    script = tmp_path / "other.py"
    script.write_text("import torch\n\n"
                      "cf = torch.compile(lambda x: x.cos() + 1, mode='max-autotune')\n"
                      "cf(torch.randn(4))\n")
    out = tmp_path / "trace"
    proc = kernelscope("run", "--all-backends", "--trace-dir", str(out), str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _graph_records(out)
    assert [r["compile_id"] for r in records] == ["0/0"]
    call = json.loads((out / "run.json").read_text())["calls"][0]
    assert call["routed"] and call["backend"] == "inductor" and call["dropped"] == ["mode"]


def test_a_graph_specialised_to_new_sizes_keeps_its_lines(tmp_path: Path) -> None:
    """A recompile for new sizes makes a dynamic graph, compiled specialised to each call's
    sizes (a retrace): its nodes keep their user lines and modules (they had none)."""
    script = tmp_path / "sizes.py"
    script.write_text("import torch\n\n"
                      "lin = torch.nn.Linear(8, 8)\n"
                      "cf = torch.compile(lambda x: torch.relu(lin(x)), backend='kernelscope')\n"
                      "cf(torch.randn(4, 8))\n"
                      "cf(torch.randn(6, 8))\n")
    out = tmp_path / "trace"
    proc = kernelscope("run", "--trace-dir", str(out), str(script))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _graph_records(out)
    assert [r["compile_id"] for r in records] == ["0/0", "0/1"]
    for r in records:
        assert r["filename"] == str(script)
        relu = [n for n in r["stages"]["capture"]["nodes"] if n["target"] == "aten.relu.default"]
        assert relu and relu[0]["line"] == 4, r["compile_id"]


def _copy(recorded: tuple[Path, Any], tmp: Path) -> tuple[Path, Path]:
    out, _ = recorded
    tmp.mkdir()
    for p in out.glob("*.json"):
        (tmp / p.name).write_bytes(p.read_bytes())
    return tmp, sorted(tmp.glob("*_compile_*.json"))[0]


def test_unknown_format_version_is_refused_naming_the_file(recorded: tuple[Path, Any],
                                                           tmp_path: Path) -> None:
    folder, first = _copy(recorded, tmp_path / "v")
    record = json.loads(first.read_text())
    record["version"] = 99
    record["versions"]["kernelscope"] = "9.0.0"
    first.write_text(json.dumps(record))
    with pytest.raises(TraceRefused, match=r"format version 99 is unknown.*written by "
                                           r"kernelscope 9\.0\.0") as e:
        open_files(read_dir(folder))
    assert first.name in str(e.value)


def test_malformed_files_are_refused(recorded: tuple[Path, Any], tmp_path: Path) -> None:
    folder, first = _copy(recorded, tmp_path / "m")
    record = json.loads(first.read_text())
    record["stages"]["scheduling"]["kernels"] = "not a list"
    first.write_text(json.dumps(record))
    with pytest.raises(TraceRefused, match="scheduling stage does not follow the event schema"):
        open_files(read_dir(folder))
    for raw, why in [(b"{not json", "not JSON"), (b'{"format": "x"}', "not a Kernelscope"),
                     (b"[" * 100 + b"]" * 100, "nested"), (b'{"a": NaN}', "not JSON")]:
        first.write_bytes(raw)
        with pytest.raises(TraceRefused, match=why):
            open_files(read_dir(folder))
    with pytest.raises(TraceRefused, match="no trace files"):
        read_dir(tmp_path)
