"""A TORCH_TRACE log of stock torch.compile opened as a trace (compiler/trace/torch_trace.py,
torch_trace_events.py; `kernelscope open` and `kernelscope run --inductor`). The logs are
made here by the installed torch (a graph break, a recompile, a training step), small."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelscope.compiler.cli import traced_run
from kernelscope.compiler.trace.reader import TraceRefused
from kernelscope.compiler.trace.torch_trace import MAX_UNKNOWN, read_log, records
from kernelscope.compiler.trace.torch_trace_events import fx_nodes, log_file, open_log, opened
from kernelscope.compiler.trace.torch_trace_run import run_traced

SCRIPT = '''import torch


def f(x):
    y = torch.sin(x) * 2
    print("a graph break")
    return y.relu() + 1


cf = torch.compile(f, dynamic=False)
cf(torch.randn(8))
cf(torch.randn(8, 2))  # a recompile: rank
lin = torch.nn.Linear(8, 4)
step = torch.compile(lambda x: torch.nn.functional.gelu(lin(x)).sum())
step(torch.randn(4, 8)).backward()  # a training step: forward and backward graphs
'''

HEAD = "V1206 02:12:58.633000 27343 site-packages/torch/_logging/_internal.py:1328] "


def test_records_stream_with_their_payloads_and_unknowns_are_kept() -> None:
    lines = [
        HEAD + json.dumps({"str": ["/u/model.py", 1]}),
        HEAD + json.dumps({"dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 1}]},
                           "frame_id": 0, "frame_compile_id": 1, "attempt": 0}),
        HEAD + json.dumps({"artifact": {"name": "recompile_reasons", "encoding": "json"},
                           "frame_id": 0, "frame_compile_id": 1, "has_payload": "x"}),
        '\t["0/0: tensor \'x\' size mismatch at index 0. expected 8, actual 16"]',
        "not a record at all",
        HEAD + json.dumps({"a_new_kind": {}, "frame_id": 0, "frame_compile_id": 1,
                           "has_payload": "y"}),
        "\tline one", "\t" + "z" * (MAX_UNKNOWN + 10),
        HEAD + json.dumps({"chromium_event": {}, "frame_id": 0, "frame_compile_id": 1}),
        HEAD + json.dumps({"artifact": {"name": "mystery"}, "compiled_autograd_id": 2,
                           "frame_id": 1, "frame_compile_id": 0, "has_payload": "z"}),
        "\t{}",
    ]
    assert len(list(records(lines))) == 7
    run = read_log(iter(lines))
    assert run.skipped_lines == 1 and run.counted["chromium_event"] == 1
    one = run.compiles["0/1"]
    assert one.frame == {"file": "/u/model.py", "line": 3, "function": "f"}
    assert one.reasons == ["0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"]
    [unknown] = one.artifacts
    assert unknown.name == "a_new_kind" and not unknown.known
    assert unknown.payload.startswith("line one\n") and len(unknown.payload) == MAX_UNKNOWN
    assert unknown.chars > MAX_UNKNOWN
    [mystery] = run.compiles["!2/1/0"].artifacts
    assert mystery.name == "mystery" and mystery.payload == "{}"
    with pytest.raises(TraceRefused, match="no torch.compile compile"):
        opened(read_log(iter(lines[:1])), "empty.log")


def test_a_readable_graph_becomes_nodes_with_shapes_and_user_lines() -> None:
    text = '''class GraphModule(torch.nn.Module):
    def forward(self, primals_1: "f32[4, 8][8, 1]cpu", primals_2: "f32[4][1]cpu"):
        # File: /u/model.py:17 in step, code: loss = gelu(lin(x)).sum()
        permute: "f32[8, 4][1, 8]cpu" = torch.ops.aten.permute.default(primals_1, [1, 0])
        addmm: "f32[4, 4][4, 1]cpu" = torch.ops.aten.addmm.default(primals_2, primals_2, permute)
        # File: /elsewhere.py:3 in g, code: h()
        sum_1: "f32[][]cpu" = torch.ops.aten.sum.default(addmm)
        return (sum_1, addmm)
'''
    nodes, edges = fx_nodes(text, "/u/model.py")
    assert [(n.name, n.op) for n in nodes] == [
        ("primals_1", "placeholder"), ("primals_2", "placeholder"),
        ("permute", "call_function"), ("addmm", "call_function"),
        ("sum_1", "call_function"), ("output", "output")]
    permute, addmm, total = nodes[2:5]
    assert permute.target == "aten.permute.default" and permute.line == 17
    assert permute.shape == [8, 4] and permute.stride == [1, 8]
    assert permute.dtype == "torch.float32" and total.shape == [] and total.line is None
    assert addmm.args == ["primals_2", "permute"]
    assert ["addmm", "output"] in edges and ["sum_1", "output"] in edges
    # A graph a cache filled keeps the comments of the run that filled it: with the user's
    # file known, a node's line is the one holding the comment's code, else none.
    source = ["import torch", "", "x = 1", "h()", "loss = gelu(lin(x)).sum()"]
    nodes, _ = fx_nodes(text, "/other/model.py", source)
    assert [n.line for n in nodes[2:5]] == [5, 5, 4]
    nodes, _ = fx_nodes(text, "/other/model.py", ["unrelated"])
    assert [n.line for n in nodes[2:5]] == [None, None, None]


def test_run_inductor_names_its_trace_directory_once(tmp_path: Path) -> None:
    argv, where = traced_run(["run", "--inductor", "train.py", "--epochs", "1"])
    assert where is not None and argv[:3] == ["run", "--trace-dir", str(where)]
    assert argv[3:] == ["--inductor", "train.py", "--epochs", "1"]
    assert traced_run(["run", "train.py"]) == (["run", "train.py"], None)
    given = str(tmp_path / "t")
    assert traced_run(["run", "--inductor", "--trace-dir", given, "a.py"])[1] == Path(given)


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The script run by `kernelscope run --inductor`'s runner: its log and the script."""
    root = tmp_path_factory.mktemp("torch_trace")
    script = root / "model.py"
    script.write_text(SCRIPT)
    assert run_traced(str(script), [], root / "trace") == 0
    log = log_file(root / "trace")
    assert log is not None and log.stat().st_size > 0
    return log, script


def test_a_real_log_opens_with_breaks_recompiles_and_a_training_step(
        logged: tuple[Path, Path]) -> None:
    log, script = logged
    trace = open_log(log)
    data = {e["stage"]: e["data"] for e in trace.events}
    assert [e["stage"] for e in trace.events] == ["source", "capture", "codegen", "inductor",
                                                 "done"]
    assert data["source"]["code"] == SCRIPT and data["source"]["filename"] == str(script)
    capture = data["capture"]
    assert [(b["line"], "print" in b["reason"]) for b in capture["graph_breaks"]] == [(6, True)]
    compiles = {c["compile_id"]: c for c in capture["compiles"]}
    recompiled = [c for c in compiles.values() if c["recompile"]]
    assert recompiled and all(c["reasons"] for c in recompiled)
    assert any("rank" in r for c in recompiled for r in c["reasons"])
    assert all(c["guards"] and c["metrics"] for c in compiles.values() if c["raw"])
    texts = {r["name"]: r["payload"] for r in compiles["0/0"]["records"] if r["known"]}
    assert "torch.sin" in texts["Dynamo graph"] and "aten.sin" in texts["post-grad graph 0"]
    kinds = [g["kind"] for g in capture["graphs"]]
    assert {"inference", "forward", "backward"} <= set(kinds)
    forward = next(g for g in capture["graphs"] if g["kind"] == "forward")
    assert any(n["target"] == "aten.addmm.default" and n["line"] == 14
               for n in forward["nodes"])
    assert capture["log"]["absent"] and capture["log"]["torch"].startswith("2.")
    # Inductor's kernels: code per graph, the wrapper without their sources, the table.
    codegen = {g["id"]: g for g in data["codegen"]["graphs"]}
    assert codegen and all(k["source"] for g in codegen.values() for k in g["kernels"])
    assert all("async_compile" in g["wrapper"]["source"] for g in codegen.values())
    table = data["inductor"]["kernels"]
    assert {k["graph"] for k in table} == set(codegen)
    names = {n["name"] for n in forward["nodes"]}
    on_forward = [k for k in table if k["graph"] == forward["id"]]
    assert any(k["kind"] == "extern" and "addmm" in k["nodes"] for k in on_forward)
    assert all(set(k["nodes"]) <= names for k in on_forward)
    assert data["inductor"]["measured"] is False


def test_an_unknown_record_of_a_real_log_is_shown_not_dropped(
        logged: tuple[Path, Path], tmp_path: Path) -> None:
    log, _ = logged
    lines = log.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if '"frame_compile_id": 0' in ln)
    planted = HEAD + json.dumps({"kernelscope_never_heard_of_it": {}, "frame_id": 0,
                                 "frame_compile_id": 0, "has_payload": "p"})
    copy = tmp_path / "copy.log"
    copy.write_text("\n".join([*lines[:start], planted, "\tsecret sauce",
                               *lines[start:]]) + "\n")
    capture = next(e["data"] for e in open_log(copy, read_source=False).events
                   if e["stage"] == "capture")
    first = next(c for c in capture["compiles"] if c["compile_id"] == "0/0")
    [kept] = [r for r in first["records"] if r["name"] == "kernelscope_never_heard_of_it"]
    assert kept["known"] is False and kept["payload"] == "secret sauce"


def test_kernelscope_open_stores_a_log_as_a_trace(logged: tuple[Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`kernelscope open DIR` on a TORCH_TRACE directory: read here, stored with a
    permalink; the stored trace is what the explorer serves."""
    from kernelscope.server.open_cmd import open_dir
    from kernelscope.server.store.sqlite import open_store

    db = str(tmp_path / "traces.sqlite3")
    code, database = open_dir(str(logged[0].parent), db=db, serve=False, browser=False)
    assert code == 0 and database is None
    url = capsys.readouterr().out.strip().splitlines()[-1]
    stored = open_store(db).get(url.rsplit("/", 1)[-1])
    assert stored is not None and stored["code"] == SCRIPT
    stages = [e["stage"] for e in stored["events"]]
    assert stages == ["source", "capture", "codegen", "inductor", "done"]
    assert stored["events"][-1]["data"]["trace_id"] == url.rsplit("/", 1)[-1]


CUDA_LOG = Path(__file__).parent / "data" / "torch_trace_cuda.log.gz"
# Made on an H100 (torch 2.11.0+cu130, Triton 3.6.0) with TORCH_TRACE=DIR INDUCTOR_PROVENANCE=1:
#   lin = torch.nn.Linear(64, 32).cuda()
#   @torch.compile
#   def step(x):
#       h = torch.nn.functional.gelu(lin(x))
#       return torch.softmax(h, dim=-1).sum()
#   step(torch.randn(16, 64, device="cuda")).backward()


def test_a_cuda_log_reads_triton_kernels_with_their_provenance() -> None:
    """The checked-in GPU log: Triton kernels launched with `.run(` after a stream line,
    each with its provenance handle, so the forward's kernels carry the FX nodes of the
    forward graph; the backward's (no node mapping in the log) keep their comments'."""
    import gzip
    import io

    with gzip.open(CUDA_LOG) as raw:
        run = read_log(io.TextIOWrapper(raw, encoding="utf-8"))
    data = {e["stage"]: e["data"] for e in opened(run, CUDA_LOG.name).events}
    assert data["source"]["device"] == "cuda"
    graphs = {g["kind"]: g for g in data["capture"]["graphs"]}
    assert set(graphs) == {"forward", "backward"}
    assert {g["backend"] for g in data["codegen"]["graphs"]} == {"triton"}
    table = data["inductor"]["kernels"]
    triton = [k for k in table if k["language"] == "python"]
    # Each kernel's code is kept once, in its graph's codegen; the table names it.
    sources = {(g["id"], k["name"]): k["source"] for g in data["codegen"]["graphs"]
               for k in g["kernels"]}
    assert len(triton) == 4 and all("@triton.jit" in sources[(k["graph"], k["name"])]
                                    for k in triton)
    forward = [k for k in triton if k["graph"] == graphs["forward"]["id"]]
    assert all(":" in k["call"] for k in forward)  # the provenance handle, read
    names = {n["name"] for n in graphs["forward"]["nodes"]}
    assert all({"erf", "mul_1"} <= set(k["nodes"]) for k in forward)
    assert {"erf", "mul_1", "addmm"} <= names
    assert all(k["bytes"] for k in table)


def test_kernelscope_open_refuses_a_log_over_the_trace_limit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A log whose trace would pass TRACE_LIMIT_MB (8 MiB; here 150 unknown records of
    64 KiB each, all kept) is refused before it is stored, saying so."""
    from kernelscope.server.open_cmd import open_dir

    graph = ('class GraphModule(torch.nn.Module):\n'
             '    def forward(self, arg0_1: "f32[8][1]cpu"):\n'
             '        sin: "f32[8][1]cpu" = torch.ops.aten.sin.default(arg0_1)\n'
             '        return (sin,)')
    ids = {"frame_id": 0, "frame_compile_id": 0}
    lines = [HEAD + json.dumps({"aot_inference_graph": {}, **ids, "has_payload": "g"}),
             *("\t" + ln for ln in graph.splitlines())]
    for i in range(150):
        lines += [HEAD + json.dumps({f"new_kind_{i}": {}, **ids, "has_payload": "p"}),
                  "\t" + "x" * MAX_UNKNOWN]
    log = tmp_path / "big.log"
    log.write_text("\n".join(lines) + "\n")
    db = tmp_path / "traces.sqlite3"
    code, _ = open_dir(str(log), db=str(db), serve=False, browser=False)
    assert code == 2 and "TRACE_LIMIT_MB" in capsys.readouterr().err


def test_the_logs_training_graphs_rebuild_as_they_run_eagerly(
        logged: tuple[Path, Path]) -> None:
    """Every graph of the fixture's log is rebuildable (the run page says so), and the
    training step's forward and backward, rebuilt from their logged code on inputs of the
    logged shapes and dtypes and compiled by Kernelscope, give what the logged graph gives
    run eagerly."""
    from test_torch_trace_rebuild import assert_same, run_rebuilt

    from kernelscope.compiler.trace.rebuild import snippet

    capture = next(e["data"] for e in open_log(logged[0]).events if e["stage"] == "capture")
    verdicts = {r["graph"]: r["why_not"] for r in capture["log"]["rebuild"]}
    assert verdicts == {g["id"]: None for g in capture["graphs"]}
    for kind in ("forward", "backward"):
        graph = next(g for g in capture["graphs"] if g["kind"] == kind)
        ours, eager = run_rebuilt(snippet(graph, "t"))
        assert_same(ours, eager)
