"""Inductor's output code read as data: its kernels, its wrapper, where each kernel is
called, the bytes of the buffers each call takes, and the FX nodes each kernel covers.

In: one output module's text (what `TORCH_LOGS=output_code` prints, `run_and_get_code`
returns, and a TORCH_TRACE's `inductor_output_code` artifact holds), and where present the
`inductor_provenance_tracking_node_mappings` artifact of the same compile (Inductor writes
it when `torch._inductor.config.trace.provenance_tracking_level` is 1: kernel
"name:handle" -> post-grad nodes, post-grad -> pre-grad nodes). Out: `OutputCode`, one
`Kernel` per generated kernel (its source cut out of the module) and per extern call
(`extern_kernels.mm`: no source), in the order the wrapper calls them.

Bytes are those of the distinct buffers a call passes (the sizes the wrapper allocates or
asserts, each counted once per call): the same measure as our own kernels' (their inputs
and stores). A size that is not a number (a symbolic shape) leaves the bytes unknown.
Torch-free: the server and the TORCH_TRACE reader import it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

# `name = async_compile.triton('name', '''...''')` / `.cpp_pybinding([...], r'''...''')`
_KERNEL = re.compile(r"^(\w+) = async_compile\.(\w+)\((.*?)'''\n?(.*?)'''", re.S | re.M)
_HANDLE = re.compile(r"#\s*\[Provenance debug handles\]\s*([\w.]+):(\d+)")
_ALLOC = re.compile(r"^\s*(\w+) = empty_strided_?\w*\(\(([^)]*)\), \(([^)]*)\),"
                    r"(?: device='?\w*'?,)?\s*(?:dtype=)?torch\.(\w+)", re.M)
_RAND = re.compile(r"^\s*(\w+) = rand_strided\(\(([^)]*)\), \(([^)]*)\), device='?[\w:]*'?,"
                   r" dtype=torch\.(\w+)", re.M)
_ALIAS = re.compile(r"^\s*(\w+) = (\w+); del \2\s*# reuse", re.M)
_VIEW = re.compile(r"^\s*(\w+) = reinterpret_tensor\((\w+), \(([^)]*)\)", re.M)
# A call in the wrapper: `k(...)`, `k.run(...)`, `extern_kernels.mm(...)`, and an ATen
# fallback assigned to its output, `buf7 = torch.ops.aten.x.default(...)`.
_CALL = re.compile(r"(?:\w+ = )?(extern_kernels\.\w+|aten\.[\w.]+|torch\.ops\.[\w.]+|\w+)"
                   r"(?:\.run)?\((.*)$")
_SOURCE_NODES = re.compile(r"#\s*(?:Topologically Sorted )?Source Nodes: \[([^\]]*)\]")
_NAME = re.compile(r"\b(?:arg|buf|primals_|tangents_|getitem)\w*\b")
_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8,
             "int32": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8,
             "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass
class Kernel:
    """One call of a kernel in the wrapper (a kernel called twice is two of these, with one
    source), or a kernel defined and never called."""

    name: str
    call: str  # unique in its module: "name:handle" (provenance), else "name" / "name#2"
    language: str  # "cpp", "python" (Triton), "" for an extern call
    source: str
    kind: str  # "pointwise", "reduction", "extern", "template", ""
    bytes: int | None = None  # the buffers this call takes
    post_nodes: list[str] = field(default_factory=list)  # Inductor's post-grad FX nodes
    nodes: list[str] = field(default_factory=list)  # the graph's own (pre-grad) FX nodes


@dataclass
class OutputCode:
    kernels: list[Kernel]
    wrapper: str  # the module with each kernel's source replaced by a one-line stub
    provenance: bool  # whether a node mapping was given (else `nodes` are empty)


def kind_of(name: str) -> str:
    """What a kernel's name says it is ("" where it does not: Inductor's C++ kernels)."""
    if name.startswith(("extern_kernels.", "aten.", "torch.ops.")):
        return "extern"
    if re.search(r"_(red|per)_", name):
        return "reduction"
    if re.search(r"_(tem|template)_", name):
        return "template"
    return "pointwise" if "_poi_" in name else ""


def kernels_of(module: str) -> list[dict[str, Any]]:
    """The generated kernels of a module: name, language and source (no calls)."""
    out = []
    for m in _KERNEL.finditer(module):
        name, how, _args, source = m.groups()
        language = "cpp" if how.startswith("cpp") else "python"
        out.append({"name": name, "language": language, "source": source.rstrip() + "\n"})
    return out


def read_output(module: str, mapping: dict[str, Any] | None = None) -> OutputCode:
    """The kernels of an output module, one per call in the order its wrapper makes them
    (kernels defined but never called last), with the bytes each call takes and the FX
    nodes it covers: from the provenance mapping where given, else from the `# Source
    Nodes` comments Inductor writes above a Triton kernel and an extern call."""
    defined = {k["name"]: k for k in kernels_of(module)}
    sizes = _buffer_bytes(module)
    above = _definition_comments(module, set(defined))
    out: list[Kernel] = []
    seen: dict[str, int] = {}
    for name, handle, args, commented in _calls(module, set(defined)):
        seen[name] = seen.get(name, 0) + 1
        call = f"{name}:{handle}" if handle else name if seen[name] == 1 else \
            f"{name}#{seen[name]}"
        d = defined.get(name, {})
        nodes = commented or above.get(name, [])
        out.append(Kernel(name, call, d.get("language", ""), d.get("source", ""),
                          kind_of(name), _call_bytes(args, sizes), nodes, nodes))
    out += [Kernel(name, name, d["language"], d["source"], kind_of(name),
                   post_nodes=above.get(name, []), nodes=above.get(name, []))
            for name, d in defined.items() if name not in seen]
    if mapping:
        _add_nodes(out, mapping)
    return OutputCode(out, _wrapper(module), bool(mapping))


def _definition_comments(module: str, names: set[str]) -> dict[str, list[str]]:
    """Kernel -> the post-grad nodes of the `# Source Nodes: [...]` comment right above
    its definition (Triton kernels have one)."""
    out: dict[str, list[str]] = {}
    pending: list[str] = []
    for line in module.splitlines():
        text = line.strip()
        if text.startswith("#"):
            pending = _commented(text) or pending
            continue
        m = re.match(r"(\w+) = async_compile", text)
        if m is not None and m.group(1) in names and pending:
            out[m.group(1)] = pending
        pending = []
    return out


def _commented(text: str) -> list[str]:
    m = _SOURCE_NODES.search(text)
    return [n.strip() for n in m.group(1).split(",") if n.strip()] if m else []


def _add_nodes(kernels: list[Kernel], mapping: dict[str, Any]) -> None:
    to_post = _dict(mapping.get("cppCodeToPost"))
    post_to_pre = _dict(mapping.get("postToPre"))
    for k in kernels:
        post = _unique(str(n) for n in _list(to_post.get(k.call)))
        if not post:
            continue
        k.post_nodes = post
        k.nodes = _unique(str(p) for n in post for p in (_list(post_to_pre.get(n)) or [n]))


def _calls(module: str, defined: set[str]
           ) -> list[tuple[str, str | None, str, list[str]]]:
    """(kernel, provenance handle or None, the call's argument text, the nodes of the
    `# Source Nodes` comment above it) for each call in the wrapper's `call`, in order. The
    comments hold until the next call (a Triton launch has `stream0 = get_raw_stream(0)`
    between them and it); a handle counts only for the kernel it names."""
    body = module[module.find("def call("):] if "def call(" in module else module
    out = []
    handle: tuple[str, str] | None = None
    commented: list[str] = []
    for line in body.splitlines():
        text = line.strip()
        if text.startswith("#"):
            if (h := _HANDLE.search(text)) is not None:
                handle = (h.group(1), h.group(2))
            commented = _commented(text) or commented
            continue
        m = _CALL.match(text)
        if m is not None and (m.group(1) in defined or kind_of(m.group(1)) == "extern"):
            name = m.group(1)
            mine = handle[1] if handle is not None and handle[0] == name else None
            out.append((name, mine, m.group(2), commented))
            handle, commented = None, []
    return out


def _buffer_bytes(module: str) -> dict[str, int | None]:
    """Bytes of each buffer the wrapper allocates, takes as input, or reuses (a reuse
    under another name, or a view of another's storage: its own shape)."""
    numel: dict[str, int | None] = {}
    itemsize: dict[str, int | None] = {}
    for m in (*_ALLOC.finditer(module), *_RAND.finditer(module)):
        name, shape, _strides, dtype = m.groups()
        numel.setdefault(name, _numel(shape))
        itemsize.setdefault(name, _ITEMSIZE.get(dtype))
    for m in _ALIAS.finditer(module):
        numel[m.group(1)], itemsize[m.group(1)] = numel.get(m.group(2)), itemsize.get(m.group(2))
    for m in _VIEW.finditer(module):
        numel[m.group(1)], itemsize[m.group(1)] = _numel(m.group(3)), itemsize.get(m.group(2))
    return {name: (n * i if n is not None and (i := itemsize.get(name)) else None)
            for name, n in numel.items()}


def _numel(shape: str) -> int | None:
    dims = [d.strip() for d in shape.split(",") if d.strip()]
    return math.prod(int(d) for d in dims) if all(d.isdigit() for d in dims) else None


def _call_bytes(args: str, sizes: dict[str, int | None]) -> int | None:
    names = _unique(n for n in _NAME.findall(args))
    if not names:
        return None
    known = [sizes.get(n) for n in names]
    if any(b is None for b in known):
        return None
    return sum(b for b in known if b is not None)


def _wrapper(module: str) -> str:
    def stub(m: re.Match[str]) -> str:
        lines = m.group(4).count("\n") + 1
        return f"{m.group(1)} = async_compile.{m.group(2)}({m.group(3)}'''<kernel {m.group(1)}:" \
               f" {lines} lines>'''"
    return _KERNEL.sub(stub, module)


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _unique(xs: Any) -> list[str]:
    return list(dict.fromkeys(xs))
