"""A TORCH_TRACE log as a trace: the events a job's trace carries, from what the log holds.

In: a `LoggedRun` (compiler/trace/torch_trace.py), the log's name, and the user's file when
the caller could read it (a local `kernelscope open`; an upload has none). Out: `Opened`
(compiler/trace/reader.py), whose events are
- `source`: the user's file (or a note that the log holds none), its first compiled frame;
- `capture`: every AOT graph of every compile id (inference, or forward and backward) with
  its nodes, shapes and user lines; the graph breaks at the user's lines; each Dynamo
  compile with its guards, every recompile reason, its compile-time metrics, its cache
  hits and misses and every other record (an unknown one with its text); `log` names the
  stages the log does not hold;
- `codegen`: per graph, Inductor's output code split into its kernels and the wrapper;
- `inductor`: the kernel table over the whole run, each call with its graph, the FX nodes
  it covers (Inductor's provenance mapping, else its comments) and the bytes it passes,
  untimed (a log holds no timings);
- `done`.
Our own stages (lowering's IR trees, scheduling's fusion decisions, the memory plan, our
compile, run and profile) are absent: no event is made up for them. Every event is checked
against the schema before it is returned. Torch-free.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections import Counter
from pathlib import Path
from typing import Any

from kernelscope.compiler.compare.inductor_code import read_output
from kernelscope.compiler.devices import CPU, CUDA
from kernelscope.compiler.events import types as ev
from kernelscope.compiler.events.check import event_errors
from kernelscope.compiler.events.stage import SCHEMA_VERSION
from kernelscope.compiler.trace.reader import Opened, TraceRefused
from kernelscope.compiler.trace.rebuild import why_not
from kernelscope.compiler.trace.torch_trace import LoggedCompile, LoggedRun, read_log

ABSENT = ["lowering: our IR trees", "scheduling: fusion decisions", "memory: the buffer plan",
          "compile, run and profile: a log holds no timings"]
KINDS = ("inference", "forward", "backward")
_DTYPES = {"f32": "torch.float32", "f64": "torch.float64", "f16": "torch.float16",
           "bf16": "torch.bfloat16", "i64": "torch.int64", "i32": "torch.int32",
           "i16": "torch.int16", "i8": "torch.int8", "u8": "torch.uint8", "b8": "torch.bool"}
_TYPE = re.compile(r"^(\w+)\[([^\]]*)\](?:\[([^\]]*)\])?")
_CALL = re.compile(r'^\s+(\w+)(?:: "([^"]*)")? = ([\w.]+)\((.*)$')  # a tuple: no type
_GETITEM = re.compile(r'^\s+(\w+)(?:: "([^"]*)")? = (?=\w+\[\d+\])()(.*)$')  # one of a tuple
_PARAM = re.compile(r'(\w+): "([^"]*)"')
_SIGNATURE = re.compile(r"def forward\((.*?)\):\s*$", re.S | re.M)
_FILE = re.compile(r"# File: (.+?):(\d+) in (\S+), code: (.*)$")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")


MAX_SOURCE = 1 << 20  # bytes of the user's file read beside a local log


def log_file(path: str | Path) -> Path | None:
    """The TORCH_TRACE log a path names: the file itself (not a Kernelscope `*.json`), or
    the largest `*.log` of a directory that holds no Kernelscope trace files; else None."""
    p = Path(path)
    if p.is_file():
        return None if p.suffix == ".json" else p
    if not p.is_dir() or any(p.glob("*.json")):
        return None
    logs = sorted((q for q in p.glob("*.log") if q.is_file()), key=lambda q: q.stat().st_size)
    return logs[-1] if logs else None


def is_log_upload(files: list[tuple[str, bytes]]) -> bool:
    """An upload of one file that is not a Kernelscope `*.json`: a TORCH_TRACE log."""
    return len(files) == 1 and not files[0][0].endswith(".json")


def open_log_bytes(name: str, raw: bytes) -> Opened:
    """An uploaded log (no user file beside it), read line by line from its bytes."""
    return opened(read_log(io.StringIO(raw.decode("utf-8", "replace"))), name)


def open_log(path: Path, read_source: bool = True) -> Opened:
    """A log file read line by line into a trace; with `read_source`, the user's file the
    log points at, when this machine has it (a local `kernelscope open`)."""
    with path.open(encoding="utf-8", errors="replace") as f:
        run = read_log(f)
    code = None
    main = Path(_main_file(run)) if run.compiles else None
    if read_source and main is not None and main.is_file() \
            and main.stat().st_size <= MAX_SOURCE:
        code = main.read_text(encoding="utf-8", errors="replace")
    others = [q.name for q in path.parent.glob("*.log") if q != path] if path.parent else []
    result = opened(run, path.name, code)
    if others:
        result.notices.append(f"{len(others)} other log(s) beside {path.name} (other "
                              f"processes): {', '.join(sorted(others)[:5])}; opened the largest")
    return result


def opened(run: LoggedRun, name: str, code: str | None = None) -> Opened:
    if not run.compiles:
        raise TraceRefused(f"{name}: no torch.compile compile in this log")
    main = _main_file(run)
    graphs: list[tuple[LoggedCompile, str, int]] = []  # compile, kind, graph id
    for one in run.compiles.values():
        for kind in KINDS:
            if kind in one.aot:
                graphs.append((one, kind, len(graphs)))
    source = _source(run, main, code)
    events = [source, _capture(run, graphs, main, name, code), _codegen(graphs),
              _inductor(graphs),
              {"ok": True, "isolated": True}]
    stages = ["source", "capture", "codegen", "inductor", "done"]
    out: list[dict[str, Any]] = [
        {"schema": SCHEMA_VERSION, "seq": i, "stage": s, "ms": 0.0, "data": d}
        for i, (s, d) in enumerate(zip(stages, events))]
    for e in out:
        problems = event_errors(e)
        if problems:
            raise TraceRefused(f"{name}: the {e['stage']} event read from it does not fit the "
                               f"event schema: {problems[0]}")
    notices = [f"not in a TORCH_TRACE log, so not shown: {what}" for what in ABSENT]
    return Opened(code=source["code"], options=source["options"], events=out, notices=notices)


def _main_file(run: LoggedRun) -> str:
    files = Counter(str(c.frame.get("file")) for c in run.compiles.values() if c.frame)
    return files.most_common(1)[0][0] if files else ""


def _source(run: LoggedRun, main: str, code: str | None) -> dict[str, Any]:
    first = next((c.frame for c in run.compiles.values() if c.frame), {})
    text = code if code is not None else f"# {main}: the log holds its line numbers, not its text\n"
    device = CUDA if any("triton" in t for c in run.compiles.values()
                         for t in c.output_code) else CPU
    source = ev.Source(code=text, filename=main, entry=str(first.get("function", "")),
                       entry_line=first.get("line"), inputs=[], device=device,
                       backend="inductor", triton_interpret=False,
                       options={"from": "TORCH_TRACE"},
                       versions=ev.Versions(python="", torch=run.torch_version, triton="",
                                            gpu=None, kernelscope=""),
                       backend_label="TorchInductor, read from a TORCH_TRACE log")
    return dataclasses.asdict(source)


def _capture(run: LoggedRun, graphs: list[tuple[LoggedCompile, str, int]], main: str,
             name: str, code: str | None) -> dict[str, Any]:
    dynamo = list(run.compiles)
    source = code.splitlines() if code is not None else None
    captured = [_graph(one, kind, gid, dynamo.index(one.compile_id), main, source)
                for one, kind, gid in graphs]
    breaks = [ev.GraphBreak(b["reason"], b["line"] if b["file"] == main else None)
              for one in run.compiles.values() for b in one.breaks]
    unique = list({(b.reason, b.line): b for b in breaks}.values())
    compiles = [_compile(one, i) for i, one in enumerate(run.compiles.values())]
    log = ev.LogInfo(format="TORCH_TRACE", file=name, records=run.records,
                     torch=run.torch_version, absent=list(ABSENT), counted=dict(run.counted),
                     unknown=[_record(a) for a in run.unknown],
                     skipped_lines=run.skipped_lines,
                     rebuild=[ev.Rebuildable(g.id, why_not(dataclasses.asdict(g)))
                              for g in captured])
    capture = ev.Capture(graphs=captured, graph_breaks=unique,
                         dynamo_graphs=sum(1 for c in run.compiles.values() if c.dynamo_graph),
                         compiles=compiles, log=log)
    return dataclasses.asdict(capture)


def _record(a: Any) -> ev.LoggedRecord:
    return ev.LoggedRecord(a.name, a.known, a.chars, a.payload)


MAX_METRIC = 2000  # characters kept of one metric's text (provenance runs to megabytes)


def _metric(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_METRIC:
        return f"{value[:MAX_METRIC]}… (cut: {len(value)} characters in the log)"
    return value


def _compile(one: LoggedCompile, call: int) -> ev.DynamoCompile:
    metrics = {k: _metric(v) for k, v in one.metrics.items()
               if isinstance(v, (int, float, str, bool)) or v is None}
    for k, v in one.bwd_metrics.items():
        if isinstance(v, (int, float, str)):
            metrics[f"backward {k}"] = _metric(v)
    return ev.DynamoCompile(
        compile_id=one.compile_id, call=call, recompile=bool(one.reasons),
        reasons=one.reasons, function=str(one.frame.get("function", "")),
        line=one.frame.get("line"), guards=_guards(one.guards), raw=one.guards[:20000],
        metrics=metrics, cache=one.cache, records=[*_graph_texts(one),
                                                   *(_record(a) for a in one.artifacts)])


def _graph_texts(one: LoggedCompile) -> list[ev.LoggedRecord]:
    """The compile's Dynamo graph and post-grad graphs, as the log printed them."""
    texts = [("Dynamo graph", one.dynamo_graph)] if one.dynamo_graph else []
    texts += [(f"post-grad graph {i}", t) for i, t in enumerate(one.post_grad)]
    return [ev.LoggedRecord(name, True, len(t), t) for name, t in texts]


def _guards(text: str) -> list[ev.Guard]:
    """Each leaf of Dynamo's guard tree: its kind and its check."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^[| ]*\+- ([A-Z_]+): (.*)$", line)
        if m:
            out.append(ev.Guard(kind=m.group(1), text=m.group(2).split("  #")[0].strip()[:500]))
    return out


def _graph(one: LoggedCompile, kind: str, gid: int, dynamo: int, main: str,
           source: list[str] | None) -> ev.CaptureGraph:
    text = one.aot[kind]
    nodes, edges = fx_nodes(text, main, source)
    return ev.CaptureGraph(id=gid, name=f"{one.compile_id} {kind}", code=text, nodes=nodes,
                           edges=edges, kind=kind,  # type: ignore[arg-type]
                           dynamo_graph=dynamo, compile_id=one.compile_id)


def fx_nodes(text: str, main: str, source: list[str] | None = None
             ) -> tuple[list[ev.FxNode], list[list[str]]]:
    """The nodes of a graph as torch prints it readable (`name: "f32[8][1]cpu" = op(...)`,
    each under the `# File: path:line in fn, code: ...` comment of the user's line it came
    from; `source`: the user's file's lines, where known)."""
    nodes: list[ev.FxNode] = []
    edges: list[list[str]] = []
    known: set[str] = set()
    head = _SIGNATURE.search(text)
    for name, typ in _PARAM.findall(head.group(1) if head else ""):
        nodes.append(_node(name, "placeholder", name, [], None, None, typ))
        known.add(name)
    line: int | None = None
    code: str | None = None
    for raw in text.splitlines():
        if (f := _FILE.search(raw)) is not None:
            line = _user_line(f.group(1), int(f.group(2)), f.group(4), main, source)
            code = f.group(4)[:300] if line is not None else None
            continue
        m = _CALL.match(raw) or _GETITEM.match(raw)
        if m is None:
            continue
        name, typ, target, rest = m.groups()
        typ, target = typ or "", target or "operator.getitem"
        args = [w for w in dict.fromkeys(_WORD.findall(rest.split(";")[0])) if w in known]
        nodes.append(_node(name, "call_function", target.removeprefix("torch.ops."), args,
                           line, code, typ))
        edges += [[a, name] for a in args]
        known.add(name)
    out = text.rsplit("return", 1)[-1] if "return" in text else ""
    args = [w for w in dict.fromkeys(_WORD.findall(out)) if w in known]
    nodes.append(_node("output", "output", "output", args, None, None, ""))
    edges += [[a, "output"] for a in args]
    return nodes, edges


def _user_line(path: str, line: int, code: str, main: str, source: list[str] | None
               ) -> int | None:
    """The user's line a `# File:` comment names. A graph a cache (AOTAutograd's, Inductor's)
    filled keeps the comments of the run that filled it, maybe another file or an older
    version of this one: where the user's file is known, the line is the one of it that
    holds the comment's code (the nearest to the line named), else none; without the file,
    the named line where the path is the user's file."""
    if source is None:
        return line if path == main else None
    want = code.strip()
    found = [i + 1 for i, text in enumerate(source) if text.strip() == want]
    return min(found, key=lambda n: abs(n - line)) if found else None


def _node(name: str, op: str, target: str, args: list[str], line: int | None,
          code: str | None, typ: str) -> ev.FxNode:
    m = _TYPE.match(typ)
    dims = [d.strip() for d in m.group(2).split(",") if d.strip()] if m else None
    strides = [d.strip() for d in (m.group(3) or "").split(",") if d.strip()] if m else None
    as_int = (lambda xs: [int(x) if x.isdigit() else x for x in xs] if xs is not None else None)
    return ev.FxNode(name=name, op=op, target=target, args=args,  # type: ignore[arg-type]
                     line=line, source=code, shape=as_int(dims), stride=as_int(strides),
                     dtype=_DTYPES.get(m.group(1)) if m else None)


def _outputs(graphs: list[tuple[LoggedCompile, str, int]]
             ) -> list[tuple[int, str, dict[str, Any] | None]]:
    """(graph id, output module, its node mapping): a compile's modules in the order
    Inductor wrote them, forward before backward."""
    by_compile: dict[str, tuple[LoggedCompile, list[int]]] = {}
    for one, _kind, gid in graphs:
        by_compile.setdefault(one.compile_id, (one, []))[1].append(gid)
    return [(ids[i], text, one.mappings[i] if i < len(one.mappings) else None)
            for one, ids in by_compile.values()
            for i, text in enumerate(one.output_code[:len(ids)])]


def _codegen(graphs: list[tuple[LoggedCompile, str, int]]) -> dict[str, Any]:
    out = []
    for gid, text, mapping in _outputs(graphs):
        code = read_output(text, mapping)
        made = [k for k in code.kernels if k.source]
        names = {k.name: k for k in made}
        wrapper_lines = [ev.WrapperLine(i + 1, next((n for n in names if n in ln), None))
                         for i, ln in enumerate(code.wrapper.splitlines())
                         if any(n in ln for n in names)]
        language = "triton" if any(k.language == "python" for k in made) else "cpp"
        out.append(ev.CodegenGraph(
            id=gid, backend=language,
            kernels=[ev.GeneratedKernel(name=k.name, language=k.language, source=k.source,
                                        line_map=[], target="TorchInductor")
                     for k in names.values()],
            wrapper=ev.Wrapper(source=code.wrapper, line_map=wrapper_lines),
            backend_label="TorchInductor"))
    return dataclasses.asdict(ev.Codegen(graphs=out))


def _inductor(graphs: list[tuple[LoggedCompile, str, int]]) -> dict[str, Any]:
    """The kernel table over the whole run: each call with its graph, nodes and bytes. Its
    code is kept once, per graph, in `codegen` (each kernel's source, the wrapper), so the
    table stays small in the trace's head however large the log (a big trace is stored in
    parts, one per compile id: server/store/parts.py)."""
    kernels = []
    for gid, text, mapping in _outputs(graphs):
        kernels += [ev.InductorKernel(name=k.name, language=k.language, source="",
                                      call=k.call, graph=gid, nodes=k.post_nodes or k.nodes,
                                      bytes=k.bytes, kind=k.kind)
                    for k in read_output(text, mapping).kernels]
    return dataclasses.asdict(ev.Inductor(
        measured=False, code=[], kernels=kernels,
        reason="a TORCH_TRACE log holds no timings; its code is in codegen, per graph"))
