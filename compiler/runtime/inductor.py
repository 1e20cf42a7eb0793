"""Inductor's own output code for the snippet, for the `inductor` event's comparison.

When the `inductor` option is on, after our own result (`profile`), the back half compiles
the captured graphs with stock `torch.compile` (Inductor) and keeps the Python module
Inductor generated for each, read through `torch._inductor.utils.run_and_get_code` (what
Inductor's own tests use; the same text `TORCH_LOGS=output_code` prints). Inductor's
provenance tracking is on while it compiles, and the node mapping it logs for each graph
(`inductor_provenance_tracking_node_mappings`, as a TORCH_TRACE holds it) says which FX
nodes each kernel covers. Out: the code and kernels of the `inductor` event, one module
per compiled graph (docs/events.md shows one; compiler/runtime/profile.py
`inductor_profile` adds the times).

Kernels and extern calls are read out of each module by compiler/compare/inductor_code.py
(the reader a TORCH_TRACE's output code goes through too); the loaded modules are returned
as well, so each kernel (a global the module's `call` looks up) can be timed in place.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from kernelscope.compiler.compare.inductor_code import kernels_of, read_output

MAX_CODE = 400_000  # characters of output code kept per module
MAPPING = "inductor_provenance_tracking_node_mappings"

Modules = list[tuple[ModuleType, list[str]]]


class _Mappings(logging.Handler):
    """The node mappings Inductor logs to its structured log, one per compiled graph."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.found: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        meta = getattr(record, "metadata", None)
        artifact = meta.get("artifact") if isinstance(meta, dict) else None
        if not isinstance(artifact, dict) or artifact.get("name") != MAPPING:
            return
        try:
            value = json.loads(getattr(record, "payload", "") or "null")
        except ValueError:
            return
        if isinstance(value, dict):
            self.found.append(value)


@contextlib.contextmanager
def provenance() -> Iterator[_Mappings]:
    """Inductor's provenance tracking on, and its node mappings kept, inside the block."""
    import torch._inductor.config as config
    from torch._logging._internal import trace_log

    handler = _Mappings()
    trace_log.addHandler(handler)
    try:
        with config.patch({"trace.provenance_tracking_level": 1}):
            yield handler
    finally:
        trace_log.removeHandler(handler)


class Graphs:
    """Which graph each Inductor compile was, and the names its FX nodes have there.

    Inductor compiles the graph Dynamo traces from ours, whose nodes Dynamo names anew
    (`var_mean_correction` for our `var_mean`); its node mapping speaks of those names.
    Dynamo traces our graph's calls one by one, so the n-th call of its graph is the n-th
    of ours: `renames` pairs them, as far as both call the same targets in the same order.
    """

    def __init__(self) -> None:
        self.compiled: list[tuple[int, dict[str, str]]] = []

    def backend(self, gid: int, ours: Any) -> Callable[..., Any]:
        """A torch.compile backend for our graph `ours` (graph `gid`): stock Inductor
        (`compile_fx`, what backend="inductor" calls), noting the compile first."""
        def compile_graph(gm: Any, example_inputs: Any) -> Any:
            from torch._inductor.compile_fx import compile_fx

            self.compiled.append((gid, renames(gm, ours)))
            return compile_fx(gm, example_inputs)

        return compile_graph


def renames(traced: Any, ours: Any) -> dict[str, str]:
    """Dynamo's node name -> ours, for the calls both graphs make in the same order."""
    out: dict[str, str] = {}
    theirs = [n for n in traced.graph.nodes if n.op == "call_function"]
    mine = [n for n in ours.graph.nodes if n.op == "call_function"]
    for a, b in zip(theirs, mine):
        if a.target != b.target:
            break
        out[a.name] = b.name
    return out


def inductor_output(build: Callable[[Graphs], Callable[[], Any]]
                    ) -> tuple[dict[str, Any], Callable[[], Any] | None, Modules]:
    """Builds the Inductor version (`build(graphs)`: a zero-argument call of the graphs,
    each compiled with `graphs.backend(...)`) and runs it once, keeping the code Inductor
    generated; returns that, the call (to time) and each output module it loaded with the
    names of its kernels."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.utils import run_and_get_code

    graphs = Graphs()
    try:
        with provenance() as mappings:
            fn = build(graphs)
            _, code = run_and_get_code(fn)
    except Exception as e:  # Inductor failing is a result to show, not our failure
        return ({"code": [], "kernels": [], "error": f"{type(e).__name__}: {e}"[:2000]},
                None, [])
    modules: Modules = []
    for text in code:
        _key, path = PyCodeCache.write(text)  # where Inductor loaded it from (same hash)
        module = next((m for m in reversed(PyCodeCache.modules)
                       if getattr(m, "__file__", None) == path),
                      PyCodeCache.modules_no_attr.get(path))
        names = [k["name"] for k in kernels_of(text)]
        if module is not None and names:
            modules.append((module, names))
    return ({"code": [c[:MAX_CODE] for c in code],
             "kernels": graph_kernels(code, mappings.found, graphs.compiled), "error": None},
            fn, modules)


def graph_kernels(code: list[str], mappings: list[dict[str, Any]],
                  compiled: list[tuple[int, dict[str, str]]]) -> list[dict[str, Any]]:
    """Each graph's kernels (the `inductor` event's `kernels`): the i-th node mapping is
    the i-th compile, and its module is the one defining the kernels it names (two graphs
    Inductor compiled to the same code share one module). Without mappings, the modules'
    own comments, and graphs by order where there is one module per compile."""
    if len(mappings) != len(compiled):
        same = len(code) == len(compiled)
        return [_kernel(k, compiled[i][0] if same else None, {})
                for i, text in enumerate(code) for k in read_output(text).kernels]
    out = []
    defined = [{k["name"] for k in kernels_of(text)} for text in code]
    for i, mapping in enumerate(mappings):
        named = {str(key).rsplit(":", 1)[0] for key in (mapping.get("cppCodeToPost") or {})}
        made = {n for n in named if "." not in n}  # generated kernels, not extern calls
        fits = [j for j, names in enumerate(defined) if made <= names]
        j = i if i in fits and len(code) == len(mappings) else fits[0] if fits else None
        if j is not None:
            gid, names = compiled[i]
            out += [_kernel(k, gid, names) for k in read_output(code[j], mapping).kernels]
    return out


def _kernel(k: Any, graph: int | None, names: dict[str, str]) -> dict[str, Any]:
    return {"name": k.name, "call": k.call, "language": k.language, "source": k.source,
            "graph": graph, "nodes": [names.get(n, n) for n in k.nodes], "bytes": k.bytes,
            "kind": k.kind}
