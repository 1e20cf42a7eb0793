"""A big TORCH_TRACE log's trace in parts, one per Dynamo compile id (server/store/parts.py
`by_compile`): a compile's graphs and its heavy entry of `capture.compiles` (guards, the raw
guard tree, its records) go to its part, the head keeps the index (every compile id with its
reasons, cache and metrics; each graph's stub; the kernel table), and the whole comes back."""

from __future__ import annotations

import copy
import json
from typing import Any

from kernelscope.server.store.parts import WHOLE_BYTES, assemble, split_if_big

BIG = "x" * (WHOLE_BYTES // 3)  # three compiles' records: over the size a trace is split at


def log_events() -> list[dict[str, Any]]:
    compiles, graphs = [], []
    for i, cid in enumerate(["0/0", "0/1", "!1/0/0"]):
        compiles.append({"compile_id": cid, "call": i, "recompile": i > 0,
                         "reasons": ["size mismatch"] if i else [], "cache": [],
                         "metrics": {"entire_frame_compile_time_s": 1.5},
                         "guards": [{"kind": "TENSOR_MATCH", "text": "x"}], "raw": "tree",
                         "records": [{"name": "Dynamo graph", "known": True,
                                      "chars": len(BIG), "payload": BIG}]})
        graphs.append({"id": i, "name": f"{cid} forward", "kind": "forward",
                       "compile_id": cid, "code": "def forward(self): ...", "nodes": [],
                       "edges": []})
    return [{"schema": 1, "seq": 0, "stage": "source", "ms": 0, "data": {"code": ""}},
            {"schema": 1, "seq": 1, "stage": "capture", "ms": 0,
             "data": {"graphs": graphs, "compiles": compiles, "graph_breaks": [],
                      "log": {"format": "TORCH_TRACE"}}},
            {"schema": 1, "seq": 2, "stage": "codegen", "ms": 0,
             "data": {"graphs": [{"id": g["id"], "kernels": []} for g in graphs]}},
            {"schema": 1, "seq": 3, "stage": "done", "ms": 0, "data": {"ok": True}}]


def test_a_big_logs_trace_is_parted_by_compile_id_and_comes_back_whole() -> None:
    events = log_events()
    parted = split_if_big(copy.deepcopy(events))
    assert parted is not None and sorted(parted.parts) == ["c0.0", "c0.1", "ca1.0.0"]
    head = {e["stage"]: e["data"] for e in parted.head}
    assert len(json.dumps(parted.head)) < 10_000  # the index, without the records
    stubs = head["capture"]["compiles"]
    assert [(c["compile_id"], c["part"], c["reasons"]) for c in stubs] == [
        ("0/0", "c0.0", []), ("0/1", "c0.1", ["size mismatch"]),
        ("!1/0/0", "ca1.0.0", ["size mismatch"])]
    assert all("records" not in c and c["lengths"]["records"] == 1 for c in stubs)
    assert [g["part"] for g in head["codegen"]["graphs"]] == ["c0.0", "c0.1", "ca1.0.0"]
    one = json.loads(parted.parts["c0.1"])
    assert [c["compile_id"] for c in one["compiles"]] == ["0/1"]
    assert [g["id"] for g in one["graphs"]["capture"]] == [1]
    assert assemble(parted.head, parted.parts) == events


def test_a_trace_of_our_own_is_still_parted_by_graph() -> None:
    events = log_events()
    del events[1]["data"]["log"]
    parted = split_if_big(events)
    assert parted is not None and sorted(parted.parts) == ["g0", "g1", "g2"]
    assert all("part" not in c for e in parted.head if e["stage"] == "capture"
               for c in e["data"]["compiles"])


GRAPH = '''class GraphModule(torch.nn.Module):
    def forward(self, arg0_1: "f32[8][1]cpu"):
        mul_1: "f32[8][1]cpu" = torch.ops.aten.mul.Tensor(arg0_1, 0.5);  arg0_1 = None
        erf: "f32[8][1]cpu" = torch.ops.aten.erf.default(mul_1);  mul_1 = None
        return (erf,)
'''


def test_a_graph_of_a_big_log_is_rebuilt_from_the_head_and_its_part_alone(
        make_app: Any) -> None:
    """GET /api/traces/<id>/graphs/<g>/rebuild on a log's trace stored in parts: the graph's
    code comes from its compile's part (the head holds only its stub)."""
    from kernelscope.compiler.trace.torch_trace_events import fx_nodes
    from kernelscope.server.web.appstate import app_state

    events = log_events()
    nodes, edges = fx_nodes(GRAPH, "")
    events[1]["data"]["graphs"][1].update(code=GRAPH, nodes=[vars(n) for n in nodes],
                                          edges=edges)
    app = make_app()
    with app.app_context():
        ident = app_state().store.put("", {}, copy.deepcopy(events), True)
        head = app_state().store.head(ident)
    assert head is not None and "c0.1" in head["parts"]
    answer = app.test_client().get(f"/api/traces/{ident}/graphs/1/rebuild")
    assert answer.status_code == 200, answer.get_json()
    code = answer.get_json()["code"]
    assert "torch.ops.aten.erf.default(mul_1)" in code and answer.get_json()["name"] == \
        "0/1 forward"
    assert app.test_client().get(f"/api/traces/{ident}/graphs/7/rebuild").status_code == 404
