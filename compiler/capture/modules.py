"""Module provenance: which nn.Module each FX node came from (capture onwards).

Dynamo records `node.meta["nn_module_stack"]` on every node it traces inside a module call
(path -> (qualified path, class)); AOTAutograd keeps it on forward nodes and puts the
forward's stack on backward nodes as `fwd_nn_module_stack`. This module turns either into
one list of (path, class name), outermost first, with the path as the user writes it
(`blocks.1.attn`, not Dynamo's `L['self'].blocks.1.attn`). The bundle carries that list as
the node's `module_stack` meta, so the back half reads it without trusting anything else.

A node's module is the innermost path ("" is the compiled module itself; None: the node ran
outside any module call). A buffer or kernel takes the modules of the nodes it came from:
their common prefix (`module`) and the sorted list (`modules`). Repeated blocks differ by
path (`blocks.0` vs `blocks.1`), which is what the UI groups by.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

META_KEY = "module_stack"  # node.meta key: list of [path, class name], outermost first
MAX_DEPTH = 64  # module nesting a bundle may carry
MAX_PATH = 300  # characters of one path (or class name) a bundle may carry

_ROOT = re.compile(r"^(?:L|G)\[['\"](?P<name>[^'\"]+)['\"]\]")
_ITEM = re.compile(r"\._modules\[['\"](?P<key>[^'\"]+)['\"]\]|\[['\"](?P<key2>[^'\"]+)['\"]\]"
                   r"|\[(?P<index>\d+)\]")
_GETATTR = re.compile(r"getattr\((?P<obj>.+), ['\"](?P<key>[^'\"]+)['\"]\)$")


def clean_path(raw: str) -> str:
    """Dynamo's source of a module (`L['self'].blocks._modules['1'].attn`, `G['model'].fc`)
    as an attribute path from the compiled module (`blocks.1.attn`, `model.fc`): a local is
    the compiled frame's own module (its `self`) and drops; a global keeps its name."""
    text = raw.strip()
    while (m := _GETATTR.match(text)) is not None:  # getattr(X, '0') -> X.0
        text = f"{m.group('obj')}.{m.group('key')}"
    prefix = ""
    m = _ROOT.match(text)
    if m is not None:
        prefix = m.group("name") if text.startswith("G") else ""
        text = text[m.end():]
    text = _ITEM.sub(lambda mm: "." + (mm.group("key") or mm.group("key2")
                                       or mm.group("index")), text)
    parts = [p for p in (prefix + text).split(".") if p]
    return ".".join(parts)


def _class_name(cls: Any) -> str:
    if isinstance(cls, type):
        return cls.__name__
    text = str(cls)
    return text.rsplit(".", 1)[-1].strip("'>")


def module_stack(meta: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A node's modules, outermost first, as (path, class name)."""
    kept = meta.get(META_KEY)
    if isinstance(kept, list):
        return [(str(p), str(c)) for p, c in kept]
    stack = meta.get("nn_module_stack") or meta.get("fwd_nn_module_stack") or {}
    out: list[tuple[str, str]] = []
    for value in stack.values():
        if not isinstance(value, tuple) or len(value) != 2:
            continue
        path = clean_path(str(value[0]))
        if not path and out:
            continue
        if out and out[-1][0] == path:
            continue
        out.append((path, _class_name(value[1])))
    return [(p, c) for p, c in out if p][:MAX_DEPTH]


def node_module(meta: Mapping[str, Any]) -> str | None:
    stack = module_stack(meta)
    return stack[-1][0] if stack else None


def common_prefix(paths: Iterable[str | None]) -> str | None:
    """The longest module path every path lies in (by dotted parts); None when none of
    them ran inside a module, "" when they only share the compiled module itself."""
    split = [p.split(".") if p else [] for p in paths if p is not None]
    if not split:
        return None
    first = split[0]
    n = len(first)
    for parts in split[1:]:
        n = min(n, len(parts))
        for i in range(n):
            if parts[i] != first[i]:
                n = i
                break
    return ".".join(first[:n])


def origin_modules(origins: Iterable[str], modules: Mapping[str, str | None]
                   ) -> tuple[str | None, list[str]]:
    """(common prefix, sorted distinct modules) of the FX nodes `origins`."""
    found = [modules.get(o) for o in origins]
    paths = sorted({p for p in found if p is not None})
    if not paths:
        return None, []
    # A node outside any module (a top-level op of the compiled function) puts the kernel
    # at the root: the prefix of its modules and "" is "".
    prefix = common_prefix([*paths, *([""] if None in found else [])])
    return prefix, paths


def graph_modules(nodes_meta: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Every module path in a graph with its class, in first-seen order (ancestors too)."""
    seen: dict[str, str] = {}
    for meta in nodes_meta:
        for path, cls in module_stack(meta):
            seen.setdefault(path, cls)
    return list(seen.items())


def check_stack(value: Any) -> bool:
    """Whether a bundle's `module_stack` meta has the shape this module writes."""
    return isinstance(value, list) and len(value) <= MAX_DEPTH and all(
        isinstance(e, list) and len(e) == 2 and all(
            isinstance(s, str) and len(s) <= MAX_PATH for s in e) for e in value)
