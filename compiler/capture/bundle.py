"""The capture bundle: what the front half (snippet, Dynamo, AOTAutograd) hands the back half.

The front half runs the user's code; the back half (lowering .. profile) must not. Between
them is one file, written by `write_bundle` and read by `read_bundle`:

- `torch.save` of `{"manifest": <JSON text>, "tensors": {key: 1-D tensor}}`, read back with
  `torch.load(weights_only=True)`, which unpickles only tensors and plain containers;
- the manifest (docs/bundle.md) holds every captured ATen graph as data: nodes with their
  opcode, a `torch.ops` target named by an allow-listed namespace (or one of a few
  `operator` functions), JSON arguments with node references, and meta (shape, dtype,
  stride, stack trace, module stack); each graph's example inputs and constants as references into
  `tensors`; and the front half's `source` and `capture` event payloads.

`read_bundle` checks all of it and raises `BundleError` naming the first thing outside the
format (an op outside the allow-list, a malformed argument, a tensor that does not match
its spec); `BundleGraph.rebuild` then makes a GraphModule and real inputs from it, with
`meta["val"]` recomputed by fake-tensor propagation in this process (the bundle's own
meta is never trusted for shapes).
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.capture.modules import META_KEY as MODULE_KEY
from kernelscope.compiler.capture.modules import check_stack, module_stack
from kernelscope.compiler.devices import CPU

FORMAT = "kernelscope-bundle"
VERSION = 1
# torch.ops namespaces a graph may call into. Everything else (custom ops, higher-order ops,
# Python callables) is refused: the back half runs only ATen/prims kernels.
OP_NAMESPACES = ("aten", "prims")
# ATen ops that touch the outside world, refused even though they are in `aten`.
DENIED_OPS = frozenset({"aten.from_file", "aten._print", "aten.save"})
BUILTINS: dict[str, Callable[..., Any]] = {
    f"operator.{name}": getattr(operator, name)
    for name in ("getitem", "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "neg",
                 "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "not_")
}
NODE_OPS = ("placeholder", "call_function", "get_attr", "output")
GRAPH_KINDS = ("forward", "backward", "inference")
DTYPES: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d
    for d in (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64,
              torch.complex128, torch.int64, torch.int32, torch.int16, torch.int8,
              torch.uint8, torch.bool, torch.float8_e4m3fn, torch.float8_e5m2)
}
LAYOUTS = {"strided": torch.strided}
MEMORY_FORMATS = {"contiguous_format": torch.contiguous_format,
                  "channels_last": torch.channels_last,
                  "preserve_format": torch.preserve_format}
MAX_NODES = 200_000
MAX_MANIFEST = 64 << 20  # characters of manifest JSON
MAX_TEXT = 8000  # a stack trace kept per node
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")
_QUALNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}(\.[A-Za-z_][A-Za-z0-9_]{0,199}){0,8}")
_DEVICE = re.compile(r"(cpu|cuda|meta)(:\d{1,3})?")
_GRAPH_KEYS = {"id", "kind", "nodes", "inputs", "constants", "inputs_recorded", "dynamo_graph",
               "compile_id"}
_COMPILE_ID = re.compile(r"\d{1,6}/\d{1,6}")
_NODE_KEYS = {"name", "op", "target", "args", "kwargs", "meta"}
_MESSAGE = re.compile(r"msg|message")  # an op argument that only becomes an error's text
ASSERT_TEXT = "a check in the captured graph failed (its message is not carried)"
_TENSOR_KEYS = {"shape", "stride", "offset", "dtype", "device", "requires_grad"}


class BundleError(ValueError):
    """The bundle is not one this version reads, or holds something outside the format."""


# -- writing (front half) ------------------------------------------------------------------
@dataclass
class BundleWriter:
    """Collects graphs and tensors, then writes one bundle file."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    graphs: list[dict[str, Any]] = field(default_factory=list)

    def tensor(self, t: torch.Tensor) -> dict[str, str]:
        from torch._subclasses.fake_tensor import is_fake

        if is_fake(t):
            raise BundleError("a fake tensor cannot be saved as data")
        key = f"t{len(self.tensors)}"
        t = t.detach()
        if any(s < 0 for s in t.stride()):
            t = t.contiguous()
        extent = _extent(t.shape, t.stride())
        flat = t.as_strided((extent,), (1,), t.storage_offset()) if extent else \
            t.new_empty((0,))
        self.tensors[key] = flat.to(CPU, copy=True).contiguous()
        self.specs[key] = {"shape": list(t.shape), "stride": list(t.stride()), "offset": 0,
                           "dtype": _dtype_name(t.dtype), "device": t.device.type,
                           "requires_grad": bool(t.requires_grad)}
        return {"tensor": key}

    def add_graph(self, gm: torch.fx.GraphModule, inputs: Sequence[Any] | None, kind: str,
                  fake_inputs: Sequence[Any] = (), dynamo_graph: int = 0,
                  compile_id: str | None = None) -> int:
        """Add one ATen graph; `inputs` are the real values it was called with (or None)."""
        gid = len(self.graphs)
        constants = {}
        for n in gm.graph.nodes:
            if n.op == "get_attr":
                value = operator.attrgetter(n.target)(gm)
                if not isinstance(value, torch.Tensor):
                    raise BundleError(f"graph {gid}: get_attr {n.target} is not a tensor")
                constants[n.target] = self.tensor(value)["tensor"]
        recorded = inputs is not None
        if inputs is None:  # never called (a backward nobody ran): zeros shaped like it
            inputs = _zeros_like(fake_inputs)
        self.graphs.append({
            "id": gid, "kind": kind, "dynamo_graph": dynamo_graph, "compile_id": compile_id,
            "nodes": [_encode_node(n) for n in gm.graph.nodes],
            "inputs": [self.tensor(a) if isinstance(a, torch.Tensor) else encode_arg(a)
                       for a in inputs],
            "constants": constants, "inputs_recorded": recorded,
        })
        return gid

    def write(self, path: str | Path, events: Mapping[str, Any],
              snippet_path: str | None = None) -> None:
        manifest = {"format": FORMAT, "version": VERSION, "torch": torch.__version__,
                    "snippet_path": snippet_path, "events": dict(events),
                    "graphs": self.graphs, "tensors": self.specs}
        text = json.dumps(manifest, allow_nan=False, default=str)
        tmp = Path(f"{path}.tmp")
        torch.save({"manifest": text, "tensors": self.tensors}, tmp)
        tmp.replace(path)


def _zeros_like(fakes: Sequence[Any]) -> list[Any]:
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        return [torch.zeros(_extent(t.shape, t.stride()), dtype=t.dtype, device=t.device)
                .as_strided(t.shape, t.stride()) if isinstance(t, torch.Tensor) else t
                for t in fakes]


def snapshot(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` with the same shape, strides and values (the storage span it views)."""
    extent = _extent(t.shape, t.stride())
    if not extent:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    flat = t.detach().as_strided((extent,), (1,), t.storage_offset()).clone()
    return flat.as_strided(t.shape, t.stride())


def _extent(shape: Sequence[int], stride: Sequence[int]) -> int:
    if any(s == 0 for s in shape):
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(shape, stride))


def _dtype_name(dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise BundleError(f"dtype {name} cannot be carried in a bundle")
    return name


def target_name(target: Any) -> str:
    for name, fn in BUILTINS.items():
        if target is fn:
            return name
    if isinstance(target, torch._ops.OpOverload):
        ns, op = target._schema.name.split("::")
        return f"{ns}.{op}.{target._overloadname}"
    raise BundleError(f"call target {target!r} is not a torch.ops overload or an allowed "
                      "builtin")


def encode_arg(a: Any) -> Any:
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if a is None or isinstance(a, (bool, int, str)):
        return a
    if isinstance(a, float):
        return a if math.isfinite(a) else {"float": repr(a)}
    if isinstance(a, list):
        return [encode_arg(x) for x in a]
    if isinstance(a, tuple):
        return {"tuple": [encode_arg(x) for x in a]}
    if isinstance(a, complex):
        return {"complex": [encode_arg(a.real), encode_arg(a.imag)]}
    if isinstance(a, torch.dtype):
        return {"dtype": _dtype_name(a)}
    if isinstance(a, torch.device):
        return {"device": str(a)}
    if isinstance(a, torch.layout):
        return {"layout": str(a).removeprefix("torch.")}
    if isinstance(a, torch.memory_format):
        return {"memory_format": str(a).removeprefix("torch.")}
    raise BundleError(f"argument {a!r} ({type(a).__name__}) cannot be carried in a bundle")


def _encode_val(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return {"shape": [int(s) for s in v.shape], "stride": [int(s) for s in v.stride()],
                "dtype": str(v.dtype).removeprefix("torch.")}
    if isinstance(v, (list, tuple)):
        return [_encode_val(x) for x in v]
    return None


def _encode_node(n: torch.fx.Node) -> dict[str, Any]:
    if n.op not in NODE_OPS:
        raise BundleError(f"node {n.name}: opcode {n.op} is not carried in a bundle")
    target = target_name(n.target) if n.op == "call_function" else str(n.target)
    trace = n.meta.get("stack_trace")
    stack = [[path, cls] for path, cls in module_stack(n.meta)]
    return {"name": n.name, "op": n.op, "target": target,
            "args": [encode_arg(a) for a in n.args],
            "kwargs": {k: encode_arg(v) for k, v in n.kwargs.items()},
            "meta": {"val": _encode_val(n.meta.get("val")),
                     "stack_trace": trace[-MAX_TEXT:] if isinstance(trace, str) else None,
                     MODULE_KEY: stack}}


# -- reading (back half) -------------------------------------------------------------------
@dataclass
class BundleGraph:
    id: int
    kind: str
    dynamo_graph: int
    nodes: list[dict[str, Any]]
    inputs: list[Any]
    constants: dict[str, str]
    inputs_recorded: bool
    compile_id: str | None = None

    def rebuild(self, tensors: Mapping[str, torch.Tensor], device: str | None = None
                ) -> tuple[torch.fx.GraphModule, list[Any]]:
        """A GraphModule and its real example inputs, meta["val"] computed here."""
        graph = torch.fx.Graph()
        env: dict[str, torch.fx.Node] = {}
        for spec in self.nodes:
            name, op = spec["name"], spec["op"]
            args = tuple(_decode(a, env, name) for a in spec["args"])
            kwargs = {k: _decode(v, env, name) for k, v in spec["kwargs"].items()}
            target: Any = resolve_target(spec["target"]) if op == "call_function" \
                else spec["target"]
            args, kwargs = _without_messages(target, args, kwargs)
            node = graph.create_node(op, target, args, kwargs, name=name)
            if node.name != name:
                raise BundleError(f"node name {name!r} is not unique or not a valid name")
            if spec["meta"].get("stack_trace"):
                node.meta["stack_trace"] = spec["meta"]["stack_trace"]
            if spec["meta"].get(MODULE_KEY):
                node.meta[MODULE_KEY] = spec["meta"][MODULE_KEY]
            env[name] = node
        outputs = [n for n in graph.nodes if n.op == "output"]
        if len(outputs) != 1 or next(iter(reversed(graph.nodes))) is not outputs[0]:
            raise BundleError(f"graph {self.id}: needs exactly one output node, last")
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.inputs):
            raise BundleError(f"graph {self.id}: {len(placeholders)} placeholders but "
                              f"{len(self.inputs)} inputs")
        root = {attr: _move(tensors[key], device) for attr, key in self.constants.items()}
        for n in graph.nodes:
            if n.op == "get_attr" and n.target not in root:
                raise BundleError(f"graph {self.id}: get_attr {n.target} has no constant")
        try:
            graph.lint()
        except Exception as e:
            raise BundleError(f"graph {self.id}: not a well-formed FX graph: {e}") from e
        gm = torch.fx.GraphModule(root, graph)
        inputs = [_move(tensors[a["tensor"]], device) if isinstance(a, dict) and "tensor" in a
                  else _decode(a, {}, "input") for a in self.inputs]
        propagate(gm, inputs)
        return gm, inputs


@dataclass
class Bundle:
    path: Path
    torch_version: str
    snippet_path: str | None
    events: dict[str, Any]
    graphs: list[BundleGraph]
    tensors: dict[str, torch.Tensor]

    def rebuild(self, device: str | None = None
                ) -> list[tuple[BundleGraph, torch.fx.GraphModule, list[Any]]]:
        return [(g, *g.rebuild(self.tensors, device)) for g in self.graphs]


def read_bundle(path: str | Path) -> Bundle:
    """Load and check a bundle; BundleError says what is wrong with it."""
    path = Path(path)
    try:
        raw = torch.load(path, weights_only=True, map_location=CPU)
    except Exception as e:  # not a torch file, or it holds more than plain data
        raise BundleError(f"{path.name}: not a capture bundle this version can read "
                          f"({type(e).__name__}: {str(e)[:300]})") from e
    _expect(isinstance(raw, dict) and set(raw) == {"manifest", "tensors"},
            "top level must be {'manifest', 'tensors'}")
    _expect(isinstance(raw["manifest"], str), "manifest must be JSON text")
    _expect(len(raw["manifest"]) <= MAX_MANIFEST, f"manifest over {MAX_MANIFEST >> 20} MiB")
    try:
        manifest = json.loads(raw["manifest"], parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise BundleError(f"manifest is not valid JSON: {str(e)[:200]}") from e
    _expect(isinstance(manifest, dict), "manifest must be an object")
    _expect(manifest.get("format") == FORMAT, f"format must be {FORMAT!r}")
    _expect(manifest.get("version") == VERSION,
            f"bundle version {manifest.get('version')!r}; this reader knows {VERSION}")
    extra = set(manifest) - {"format", "version", "torch", "snippet_path", "events", "graphs",
                             "tensors"}
    _expect(not extra, f"unknown manifest keys {sorted(extra)}")
    events = manifest.get("events")
    _expect(isinstance(events, dict) and set(events) <= {"source", "capture", "error"}
            and all(isinstance(v, dict) and set(v) == {"ms", "data"}
                    and isinstance(v["ms"], (int, float)) and isinstance(v["data"], dict)
                    for v in events.values()),
            "events must map 'source', 'capture' or 'error' to {ms, data}")
    _expect("error" in events or {"source", "capture"} <= set(events),
            "events need 'source' and 'capture', or an 'error'")
    tensors = _check_tensors(manifest.get("tensors"), raw["tensors"])
    graphs_raw = manifest.get("graphs")
    _expect(isinstance(graphs_raw, list), "graphs must be a list")
    graphs = [_check_graph(i, g, tensors) for i, g in enumerate(graphs_raw)]
    snippet_path = manifest.get("snippet_path")
    _expect(snippet_path is None or isinstance(snippet_path, str), "snippet_path: string")
    return Bundle(path, str(manifest.get("torch")), snippet_path, events, graphs, tensors)


def _no_constant(name: str) -> Any:
    raise BundleError(f"manifest holds {name}, which JSON does not allow")


def _expect(cond: bool, message: str) -> None:
    if not cond:
        raise BundleError(message)


def _check_tensors(specs: Any, data: Any) -> dict[str, torch.Tensor]:
    _expect(isinstance(specs, dict) and isinstance(data, dict), "tensors must be objects")
    _expect(set(specs) == set(data), "tensor specs and tensor data name different keys")
    out = {}
    for key, spec in specs.items():
        where = f"tensor {key!r}"
        _expect(isinstance(spec, dict) and set(spec) == _TENSOR_KEYS, f"{where}: bad spec")
        shape, stride = spec["shape"], spec["stride"]
        _expect(_ints(shape) and _ints(stride) and len(shape) == len(stride)
                and all(s >= 0 for s in shape + stride) and spec["offset"] == 0,
                f"{where}: shape/stride must be lists of non-negative ints")
        _expect(spec["dtype"] in DTYPES, f"{where}: dtype {spec['dtype']!r} not allowed")
        _expect(isinstance(spec["device"], str) and _DEVICE.fullmatch(spec["device"])
                is not None, f"{where}: bad device")
        flat = data[key]
        _expect(type(flat) is torch.Tensor and flat.dim() == 1 and flat.is_contiguous()
                and flat.dtype == DTYPES[spec["dtype"]]
                and flat.numel() == _extent(shape, stride),
                f"{where}: data does not match its spec")
        _expect(isinstance(spec["requires_grad"], bool), f"{where}: requires_grad")
        out[key] = flat.as_strided(shape, stride) if flat.numel() else \
            torch.empty_strided(shape, stride, dtype=flat.dtype)
    return out


def _ints(v: Any) -> bool:
    return isinstance(v, list) and all(type(x) is int for x in v)


def _check_graph(i: int, g: Any, tensors: Mapping[str, torch.Tensor]) -> BundleGraph:
    where = f"graph {i}"
    _expect(isinstance(g, dict) and set(g) == _GRAPH_KEYS, f"{where}: keys must be "
            f"{sorted(_GRAPH_KEYS)}")
    _expect(g["id"] == i and g["kind"] in GRAPH_KINDS and type(g["dynamo_graph"]) is int,
            f"{where}: bad id, kind ({'/'.join(GRAPH_KINDS)}) or dynamo_graph")
    nodes = g["nodes"]
    _expect(isinstance(nodes, list) and 0 < len(nodes) <= MAX_NODES, f"{where}: nodes")
    for n in nodes:
        _check_node(where, n)
    _expect(isinstance(g["inputs"], list), f"{where}: inputs must be a list")
    for a in g["inputs"]:
        if isinstance(a, dict) and "tensor" in a:
            _expect(set(a) == {"tensor"} and a["tensor"] in tensors, f"{where}: input {a}")
        else:
            _check_arg(where, a, 0)
    _expect(isinstance(g["constants"], dict) and all(
        isinstance(k, str) and _QUALNAME.fullmatch(k) and v in tensors
        for k, v in g["constants"].items()), f"{where}: constants")
    _expect(isinstance(g["inputs_recorded"], bool), f"{where}: inputs_recorded")
    cid = g["compile_id"]
    _expect(cid is None or (isinstance(cid, str) and _COMPILE_ID.fullmatch(cid) is not None),
            f"{where}: compile_id")
    return BundleGraph(i, g["kind"], g["dynamo_graph"], nodes, g["inputs"], g["constants"],
                       g["inputs_recorded"], cid)


def _check_node(where: str, n: Any) -> None:
    _expect(isinstance(n, dict) and set(n) == _NODE_KEYS, f"{where}: node keys must be "
            f"{sorted(_NODE_KEYS)}")
    name = n["name"]
    _expect(isinstance(name, str) and _NAME.fullmatch(name) is not None,
            f"{where}: bad node name {str(name)[:60]!r}")
    where = f"{where}, node {name}"
    _expect(n["op"] in NODE_OPS, f"{where}: opcode {str(n['op'])[:40]!r} not allowed")
    _expect(isinstance(n["target"], str), f"{where}: target must be a string")
    if n["op"] == "call_function":
        resolve_target(n["target"])
    elif n["op"] == "output":
        _expect(n["target"] == "output", f"{where}: output target")
    elif n["op"] == "placeholder":  # FX writes a placeholder's target into `def forward`
        _expect(n["target"] == name, f"{where}: a placeholder's target must be its name")
    else:
        _expect(_QUALNAME.fullmatch(n["target"]) is not None, f"{where}: bad target")
    _expect(isinstance(n["args"], list) and isinstance(n["kwargs"], dict), f"{where}: args")
    for a in [*n["args"], *n["kwargs"].values()]:
        _check_arg(where, a, 0)
    _expect(all(isinstance(k, str) and _NAME.fullmatch(k) for k in n["kwargs"]),
            f"{where}: kwarg names")
    meta = n["meta"]
    _expect(isinstance(meta, dict) and set(meta) <= {"val", "stack_trace", MODULE_KEY},
            f"{where}: meta")
    _expect(meta.get(MODULE_KEY) is None or check_stack(meta[MODULE_KEY]),
            f"{where}: module_stack")
    trace = meta.get("stack_trace")
    _expect(trace is None or (isinstance(trace, str) and len(trace) <= MAX_TEXT),
            f"{where}: stack_trace")


_TAGS = {"node", "tuple", "float", "complex", "dtype", "device", "layout", "memory_format"}


def _check_arg(where: str, a: Any, depth: int) -> None:
    _expect(depth < 16, f"{where}: arguments nested too deep")
    if a is None or isinstance(a, (bool, int, float, str)):
        _expect(not isinstance(a, str) or len(a) <= 200, f"{where}: string argument too long")
        return
    if isinstance(a, list):
        for x in a:
            _check_arg(where, x, depth + 1)
        return
    _expect(isinstance(a, dict) and len(a) == 1 and next(iter(a)) in _TAGS,
            f"{where}: argument {str(a)[:80]} is not one the format knows")
    tag, v = next(iter(a.items()))
    ok = {"node": lambda: isinstance(v, str) and _NAME.fullmatch(v) is not None,
          "tuple": lambda: isinstance(v, list),
          "float": lambda: v in ("inf", "-inf", "nan"),
          "complex": lambda: isinstance(v, list) and len(v) == 2,
          "dtype": lambda: v in DTYPES,
          "device": lambda: isinstance(v, str) and _DEVICE.fullmatch(v) is not None,
          "layout": lambda: v in LAYOUTS,
          "memory_format": lambda: v in MEMORY_FORMATS}[tag]()
    _expect(bool(ok), f"{where}: bad {tag} argument {str(v)[:80]}")
    if tag in ("tuple", "complex"):
        for x in v:
            _check_arg(where, x, depth + 1)


def resolve_target(name: str) -> Callable[..., Any]:
    """An allow-listed call target from its qualified name (never a general lookup)."""
    if name in BUILTINS:
        return BUILTINS[name]
    parts = name.split(".")
    if len(parts) != 3 or parts[0] not in OP_NAMESPACES or \
            not all(_NAME.fullmatch(p) and not p.startswith("__") for p in parts[1:]):
        raise BundleError(f"call target {name[:120]!r} is not allowed: only "
                          f"{', '.join(f'torch.ops.{ns}.*' for ns in OP_NAMESPACES)} "
                          "overloads and a few operator functions")
    if f"{parts[0]}.{parts[1]}" in DENIED_OPS:
        raise BundleError(f"call target {name!r} is not allowed (it reaches outside the "
                          "process)")
    packet = getattr(getattr(torch.ops, parts[0]), parts[1], None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        raise BundleError(f"call target {name!r}: no such operator")
    op = getattr(packet, parts[2], None)
    if not isinstance(op, torch._ops.OpOverload):
        raise BundleError(f"call target {name!r}: no such overload")
    return op


def _without_messages(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                      ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """An op's message arguments (`_assert_async`'s `assert_msg`) replaced by our own text:
    whatever the op raises with it would otherwise be the snippet's words in a stage the
    compiler reports."""
    if not isinstance(target, torch._ops.OpOverload):
        return args, kwargs
    schema = target._schema.arguments
    drop = {a.name for a in schema if _MESSAGE.search(a.name) and str(a.type) == "str"}
    if not drop:
        return args, kwargs
    args = tuple(ASSERT_TEXT if i < len(schema) and schema[i].name in drop else a
                 for i, a in enumerate(args))
    return args, {k: ASSERT_TEXT if k in drop else v for k, v in kwargs.items()}


def _decode(a: Any, env: Mapping[str, torch.fx.Node], where: str) -> Any:
    if isinstance(a, list):
        return [_decode(x, env, where) for x in a]
    if not isinstance(a, dict):
        return a
    tag, v = next(iter(a.items()))
    if tag == "node":
        if v not in env:
            raise BundleError(f"node {where}: argument names {v!r}, not an earlier node")
        return env[v]
    if tag == "tuple":
        return tuple(_decode(x, env, where) for x in v)
    if tag == "float":
        return float(v)
    if tag == "complex":
        return complex(_decode(v[0], env, where), _decode(v[1], env, where))
    if tag == "dtype":
        return DTYPES[v]
    if tag == "device":
        return torch.device(v)
    if tag == "layout":
        return LAYOUTS[v]
    return MEMORY_FORMATS[v]


def _move(t: torch.Tensor, device: str | None) -> torch.Tensor:
    """The tensor on `device` (None: where it was captured), strides kept."""
    extent = _extent(t.shape, t.stride())
    if not extent:
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device or CPU)
    # Copy the span of storage the view covers, then view it again: exact strides, even
    # overlapping ones (an expanded input).
    flat = t.detach().as_strided((extent,), (1,), 0).to(device or t.device, copy=True)
    return flat.as_strided(t.shape, t.stride())


def propagate(gm: torch.fx.GraphModule, inputs: list[Any]) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with torch.no_grad():
            FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*_fakes(mode, inputs))
    except Exception as e:
        raise BundleError(f"graph does not type-check on its inputs: {type(e).__name__}: "
                          f"{str(e)[:500]}") from e


def _fakes(mode: Any, inputs: list[Any]) -> list[Any]:
    """Fake inputs of the real ones' sizes, strides and dtypes, made by the fake mode's
    factory (far cheaper than converting each real tensor). Exact: every rebuilt input is
    a storage of its own at offset 0 (`_move`), so none aliases another."""
    with mode:
        return [torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device)
                if isinstance(a, torch.Tensor) else a for a in inputs]
