"""Whole-graph compile cache: one ATen graph, as compiled before, found again by its key.

A warm compile of a graph that was compiled before (same graph, same input metadata,
same options, same torch/triton/Python, same compiler source) needs none of lowering,
scheduling, memory planning or code generation: the wrapper module and the built library
they produced are on disk already (compiler/runtime/loader.py writes them under
content-derived names). This module computes that key and keeps, per key, an entry
`fxgraph_<key>.json` naming those files with their hashes; a hit is verified before
anything is imported, and an entry that does not verify is not used (the graph is then
compiled again and the entry rewritten).

In: the FX graph, its example inputs, the options, the node-to-source-line map. Out: the
key (or why the graph is not cached), and `lookup` / `store` of entries. What was decided
is data (`GraphCacheStatus`) for the `compile` event and for the torch.compile path.
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.runtime.cache import cache_root, content_key, write_atomic

ENTRY_VERSION = 1
MAX_CONSTANT_BYTES = 64 << 20  # a graph with a bigger tensor constant is not cached


@dataclass
class GraphCacheStatus:
    """What the whole-graph cache did for one graph (the `compile` event's `graph_cache`)."""

    key: str | None
    status: str  # "hit", "miss", "stale" (an entry did not verify: rebuilt), "bypass"
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "status": self.status, "reason": self.reason}


@dataclass(frozen=True)
class Entry:
    """A cached graph: its backend, its wrapper module and its built library (if any)."""

    backend: str
    device: str
    wrapper: Path
    source: Path | None  # what the backend built the library from
    kernels: list[str]
    constants: list[str]  # get_attr nodes whose tensors follow the inputs, in wrapper order


@functools.lru_cache(maxsize=1)
def compiler_source_hash() -> str:
    """SHA-256 over every source file of the compiler package (a change anywhere misses)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- the key ----------------------------------------------------------------------------
class NotCacheable(Exception):
    pass


def _tensor_meta(t: torch.Tensor) -> list[Any]:
    for s in (*t.shape, *t.stride()):
        if not isinstance(s, int):
            raise NotCacheable("symbolic sizes")
    plain = type(t) in (torch.Tensor, torch.nn.Parameter) or \
        isinstance(t, torch._subclasses.FakeTensor)
    return [list(t.shape), list(t.stride()), t.storage_offset(), str(t.dtype), str(t.device),
            t.requires_grad, "Tensor" if plain else type(t).__qualname__]


def _input_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return _tensor_meta(x)
    if isinstance(x, (bool, int, float, str, type(None))):
        return [type(x).__name__, repr(x)]
    raise NotCacheable(f"an input of type {type(x).__name__}")


def _constant(value: Any) -> Any:
    """A get_attr value as key material: a tensor by its metadata and bytes."""
    if isinstance(value, torch.fx.GraphModule):
        return ["graph", _graph_text(value)]
    if not isinstance(value, torch.Tensor):
        return ["value", repr(value)]
    from torch._subclasses.fake_tensor import is_fake, unset_fake_temporarily

    if is_fake(value) or value.nbytes > MAX_CONSTANT_BYTES:
        raise NotCacheable("a tensor constant that cannot be hashed")
    with unset_fake_temporarily():
        flat = value.detach().cpu().contiguous().reshape(-1)  # 0-d tensors have no byte view
        data = flat.view(torch.uint8).numpy().tobytes()
    return [*_tensor_meta(value), hashlib.sha256(data).hexdigest()]


def _safe_target(target: Any) -> bool:
    """Targets that the graph's code names unambiguously: an op, a builtin, a function of
    torch itself (a Dynamo graph's `torch.nn.functional.gelu`), never a user function."""
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket,
                           torch._ops.HigherOrderOperator)):
        return True
    module = getattr(target, "__module__", None) or ""
    return module in (operator.__name__, "_operator", "builtins", "math") or \
        module == "torch" or module.startswith("torch.")


def _graph_text(gm: torch.fx.GraphModule) -> list[Any]:
    parts: list[Any] = [gm.code]
    for node in gm.graph.nodes:
        if node.op == "call_function" and not _safe_target(node.target):
            raise NotCacheable(f"node {node.name} calls {node.target!r}")
        if node.op == "call_module":
            raise NotCacheable(f"node {node.name} calls a module")
        if node.op == "get_attr":
            parts.append([node.target, _constant(operator.attrgetter(str(node.target))(gm))])
    return parts


def graph_key(gm: torch.fx.GraphModule, example_inputs: list[Any], options: Any,
              context: dict[str, Any], tools: dict[str, str]) -> tuple[str | None, str]:
    """(key, "") for a graph the cache can hold, else (None, why not). Everything that can
    change what the pipeline generates goes in: the graph's code (and its constants), each
    input's shape/stride/offset/dtype/device, the options, `context` (the source lines the
    kernels' comments cite, the inputs the graph updates in place), the compiler's own
    source, the tools (torch, triton, Python, C++ compiler, machine)."""
    try:
        material: dict[str, Any] = {
            "graph": _graph_text(gm),
            "inputs": [_input_meta(x) for x in example_inputs],
        }
    except NotCacheable as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001 - the cache is an optimisation: never fail a compile
        return None, f"could not key the graph: {type(e).__name__}: {e}"
    material.update(
        options=options.to_json(), context=context,
        compiler=compiler_source_hash(), default_dtype=str(torch.get_default_dtype()),
        tools=tools, machine=platform.machine())
    return content_key("fxgraph", json.dumps(material, sort_keys=True, default=str)), ""


# -- entries ----------------------------------------------------------------------------
def _entry_path(key: str, options: Any, kind: str = "fxgraph") -> Path:
    return cache_root(options.cache_dir) / f"{kind}_{key}.json"


def link(key: str, graph: str, options: Any) -> None:
    """Record that the Dynamo graph `key` compiles to the ATen graph `graph` alone (with
    nothing of AOTAutograd's runtime around it: compiler/dynamo_cache.py)."""
    data = {"version": ENTRY_VERSION, "key": key, "graph": graph}
    write_atomic(_entry_path(key, options, "dynamo"), json.dumps(data))


def linked(key: str, options: Any) -> str | None:
    """The ATen graph key `link` recorded for the Dynamo graph `key`, if any (an entry
    that does not read as one is removed)."""
    path = _entry_path(key, options, "dynamo")
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        if data.get("version") == ENTRY_VERSION and data.get("key") == key and \
                isinstance(data.get("graph"), str):
            return str(data["graph"])
    except (OSError, ValueError, AttributeError):
        pass
    path.unlink(missing_ok=True)
    return None


def lookup(key: str, options: Any) -> tuple[Entry | None, str]:
    """The verified entry for `key` (None, "" when there is none; None, why when one was
    there but did not verify: the compile that follows rewrites it, and rebuilds a library
    that did not verify, which is removed here)."""
    path = _entry_path(key, options)
    if not path.exists():
        return None, ""
    try:
        data = json.loads(path.read_text())
        why = _verify(data, key, path.parent)
    except (OSError, ValueError, KeyError, TypeError) as e:
        why = f"unreadable entry ({type(e).__name__})"
    if why:
        return None, why
    src = data["source"]
    return Entry(data["backend"], data["device"], path.parent / data["wrapper"],
                 path.parent / src if src else None, list(data["kernels"]),
                 list(data["constants"])), ""


def _verify(data: dict[str, Any], key: str, root: Path) -> str:
    if data.get("version") != ENTRY_VERSION or data.get("key") != key:
        return "entry of another version or key"
    wrapper = root / data["wrapper"]
    wrapper_key = data["wrapper"].removeprefix("graph_").removesuffix(".py")
    if not wrapper.exists() or content_key(wrapper.read_text(), data["backend"]) != wrapper_key:
        return f"wrapper {wrapper.name} missing or does not hash to its name"
    if data["source"] and not (root / data["source"]).exists():
        return f"library source {data['source']} missing"
    if data["library"]:
        lib = root / data["library"]
        if not lib.exists() or file_sha256(lib) != data["library_sha256"]:
            lib.unlink(missing_ok=True)  # rebuilt from its source on the compile that follows
            return f"library {lib.name} missing or not the one built"
    return ""


def store(key: str, options: Any, entry: Entry, library: Path | None) -> None:
    """Write the entry for `key`: its files by name, the built library with its hash."""
    data = {"version": ENTRY_VERSION, "key": key, "backend": entry.backend,
            "device": entry.device, "wrapper": entry.wrapper.name, "kernels": entry.kernels,
            "constants": entry.constants,
            "source": entry.source.name if entry.source else None,
            "library": library.name if library else None,
            "library_sha256": file_sha256(library) if library else None}
    write_atomic(_entry_path(key, options), json.dumps(data, indent=1))


def constant_values(gm: torch.fx.GraphModule, names: list[str]) -> list[Any]:
    """The tensors of the graph's get_attr nodes `names`, in that order."""
    nodes = {n.name: n for n in gm.graph.nodes if n.op == "get_attr"}
    return [operator.attrgetter(str(nodes[name].target))(gm) for name in names]
