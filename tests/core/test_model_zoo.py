"""A model zoo of user-defined modules through the whole pipeline (C++ backend, against
eager), as the explorer and the CLI run a snippet: nn.Sequential, a ModuleList of
identical blocks, nested modules and tiny Hugging Face models built from configs. Each
must compile (classes the snippet defines are importable for Dynamo), and its nodes,
buffers and kernels must name their modules, repeated blocks apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ks_schema import check_stream
from model_zoo import ZOO

from kernelscope.compiler.capture.modules import clean_path, common_prefix, origin_modules
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.pipeline import run_pipeline


def _events(code: str, path: Path) -> dict[str, Any]:
    path.write_text(code)
    options = CompileOptions(device="cpu", backend="cpp", profile=False)
    events = [json.loads(e.to_json()) for e in run_pipeline(code, options, str(path))]
    check_stream(events)
    return {e["stage"]: e["data"] for e in events}


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_compiles_with_module_paths(name: str, tmp_path: Path) -> None:
    code, paths = ZOO[name]
    by_stage = _events(code, tmp_path / f"{name}.py")
    assert "error" not in by_stage, by_stage.get("error")
    assert by_stage["run"]["ok"], by_stage["run"]
    graph = by_stage["capture"]["graphs"][0]
    declared = {m["path"]: m["type"] for m in graph["modules"]}
    node_modules = {n["module"] for n in graph["nodes"] if n["module"] is not None}
    assert node_modules and node_modules <= set(declared)
    kernels = by_stage["scheduling"]["graphs"][0]["kernels"]
    kernel_modules = {m for k in kernels for m in k["modules"]}
    for p in paths:  # each repeated block has kernels of its own path
        assert any(m == p or m.startswith(p + ".") for m in kernel_modules), (p, kernel_modules)
    for k in kernels:  # the kernel's module is the common prefix of what it fuses
        if k["modules"]:
            assert all(m == k["module"] or not k["module"] or m.startswith(k["module"] + ".")
                       for m in k["modules"])
    buffers = by_stage["lowering"]["graphs"][0]["buffers"]
    assert any(b["module"] for b in buffers)
    codegen = by_stage["codegen"]["graphs"][0]["kernels"]
    scheduled = {k["name"]: k["module"] for k in kernels}
    assert all(k["module"] == scheduled[k["name"]] for k in codegen)


def test_module_list_blocks_are_told_apart(tmp_path: Path) -> None:
    """Two identical blocks map to the same source lines; their kernels differ by path."""
    by_stage = _events(ZOO["module_list"][0], tmp_path / "blocks.py")
    kernels = by_stage["scheduling"]["graphs"][0]["kernels"]
    by_lines: dict[tuple[int, ...], set[str]] = {}
    for k in kernels:
        if k["module"]:
            by_lines.setdefault(tuple(k["lines"]), set()).add(k["module"].split(".")[1])
    assert any(len(blocks) == 3 for blocks in by_lines.values()), by_lines


@pytest.mark.parametrize("raw, path", [
    ("L['self'].blocks.1.attn", "blocks.1.attn"),
    ("L['self'].blocks._modules['1'].attn", "blocks.1.attn"),
    ("L['mod'].layers[0]", "layers.0"),
    ("G['model'].fc", "model.fc"),
    ("getattr(L['self'].h, '0')", "h.0"),
    ("L['self']", ""),
])
def test_clean_path(raw: str, path: str) -> None:
    assert clean_path(raw) == path


def test_common_prefix_by_dotted_parts() -> None:
    assert common_prefix(["blocks.1.up", "blocks.1.down"]) == "blocks.1"
    assert common_prefix(["blocks.1", "blocks.10"]) == "blocks"
    assert common_prefix([None]) is None
    assert origin_modules(["a", "b"], {"a": "h.0.mlp", "b": None}) == ("", ["h.0.mlp"])
