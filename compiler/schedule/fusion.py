"""Fusion: group scheduler nodes into kernels, recording every decision as data.

Pointwise nodes of N elements join a reduction kernel of (X, R) when N is X * R (over its
input) or X (an epilogue). A node recomputes another's pointwise result, but reads a
reduction's result from registers, so only at its own output position. Candidate pairs
share a buffer (vertical: one writes what the other reads; horizontal: both read it), are
scored by the bytes saved (twice an intermediate's, once each shared input's) and tried
best first; reductions of one shape that read only what one kernel writes pair as
siblings. A GEMM template takes only pointwise consumers that read the product at the
element it computes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelscope.compiler.events.types import FusionDecision
from kernelscope.compiler.ir.handlers import body_vars
from kernelscope.compiler.ir.index_print import sympy_str
from kernelscope.compiler.ir.indexing import (
    contiguous_strides,
    decompose,
    index_vars,
    simplify_index,
)
from kernelscope.compiler.schedule.domain import split_point
from kernelscope.compiler.schedule.kinds import KernelKind
from kernelscope.compiler.schedule.nodes import SchedNode, canonical

MAX_DECISIONS = 5000


@dataclass
class Group:
    """Nodes fused into one kernel; never changed once made (a merge makes a new one), so
    its reads and writes are computed once."""

    nodes: list[SchedNode]
    _writes: frozenset[str] = field(init=False, repr=False)
    _reads: frozenset[str] = field(init=False, repr=False)
    label: str = field(init=False)
    order: int = field(init=False)  # its first node's place in the program

    def __post_init__(self) -> None:
        self._writes = frozenset(w for n in self.nodes for w in n.writes)
        self._reads = frozenset(r for n in self.nodes for r in n.reads)
        self.label = "+".join(n.name for n in self.nodes)
        self.order = min(n.order for n in self.nodes)

    @property
    def kind(self) -> KernelKind:
        return KernelKind.of_group(n.kind for n in self.nodes)

    @property
    def shape(self) -> tuple[int, int]:
        for n in self.nodes:
            if n.kind.reduces:
                return n.numel, n.rnumel
        return self.nodes[0].numel, 1

    def writes(self) -> frozenset[str]:
        return self._writes

    def reads(self) -> frozenset[str]:
        return self._reads


@dataclass
class FusionResult:
    groups: list[Group]
    decisions: list[FusionDecision] = field(default_factory=list)


def fuse(nodes: list[SchedNode], sizes: dict[str, int], enabled: bool = True) -> FusionResult:
    """Greedy fusion: best-scoring legal pair first, until nothing more fuses."""
    groups = [Group([n]) for n in nodes]
    result = FusionResult(groups)
    tried: set[tuple[str, str]] = set()
    while len(result.decisions) < MAX_DECISIONS:
        fused = False
        consumers = _consumers(result.groups)
        for a, b, kind, score in _candidates(result.groups, sizes):
            if (a.label, b.label) in tried:
                continue
            tried.add((a.label, b.label))
            ok, reason = (False, "fusion is turned off") if not enabled else \
                can_fuse(a, b, kind, consumers)
            result.decisions.append(FusionDecision(a.label, b.label, ok, kind, reason, score))
            if ok:
                result.groups = _merge(result.groups, a, b)
                fused = True
                break
        if not fused:
            break
    return result


def _candidates(groups: list[Group], sizes: dict[str, int]
                ) -> list[tuple[Group, Group, str, int]]:
    out = []
    readers, pos = _readers(groups)
    for i, a in enumerate(groups):
        wa, ra = a.writes(), a.reads()
        # the groups after a that read something a writes or reads (the rest share
        # nothing with a); their order does not matter: the sort key is unique per pair
        partners = {id(b): b for name in wa | ra for b in readers.get(name, ())
                    if pos[id(b)] > i}
        for b in partners.values():
            # Bytes saved: an intermediate neither stored nor loaded, an input loaded once.
            shared_dep, shared_in = wa & b.reads(), ra & b.reads()
            saved = 2 * sum(sizes.get(n, 0) for n in shared_dep) + \
                sum(sizes.get(n, 0) for n in shared_in)
            if shared_dep or shared_in:
                out.append((a, b, "vertical" if shared_dep else "horizontal", saved))
        out.extend((b, c, "siblings", 0) for b, c in _siblings(a, readers, pos))
    out.sort(key=lambda c: (-c[3], c[0].order, c[1].order))
    return out


def _siblings(a: Group, readers: dict[str, list[Group]], pos: dict[int, int]
              ) -> list[tuple[Group, Group]]:
    """Pairs of reductions of one shape that read only what `a` writes (the second passes
    of split reductions whose first passes share a kernel): one launch for both."""
    only = [b for b in {id(b): b for w in a.writes() for b in readers.get(w, ())}.values()
            if _reduces(b) and b.reads() <= a.writes()]
    only.sort(key=lambda b: pos[id(b)])
    return [(b, c) for i, b in enumerate(only) for c in only[i + 1:] if b.shape == c.shape]


def can_fuse(a: Group, b: Group, kind: str, consumers: dict[int, list[Group]]
             ) -> tuple[bool, str]:
    """Whether a and b can be one kernel, and why; `consumers` is `_consumers(groups)`."""
    if not a.kind.generated or not b.kind.generated:
        ext = b if a.kind.generated else a
        return False, f"{ext.label} is an extern call (runs in ATen, not in our kernel)"
    devs = {n.buffer.device for n in a.nodes + b.nodes}
    if len(devs) > 1:
        return False, "nodes are on different devices"
    if a.shape != b.shape and _reduces(a) and _reduces(b):
        # A reduction over one element (x.prod(0) of a 1 x N tensor) is still a
        # reduction: its group's shape is its own (N x 1), not a pointwise N elements.
        (n1, r1), (n2, r2) = a.shape, b.shape
        return False, f"different reductions: {n1}x{r1} vs {n2}x{r2}"
    if KernelKind.TEMPLATE in (a.kind, b.kind):
        ok, why = _epilogue_ok(a, b, kind)
        if not ok:
            return False, why
    ok, why = _shapes_compatible(a.shape, b.shape)
    if not ok:
        return False, why
    why = _recomputes_compared(a, b)
    if why:
        return False, why
    path = _path_through_other(a, b, consumers)
    if path:
        return False, f"{b.label} depends on {a.label} through {path} (fusing makes a cycle)"
    ok, why = _reduction_reads_ok(a, b)
    if not ok:
        return False, why
    if kind == "siblings":
        return True, f"{a.label} and {b.label} reduce only what one kernel writes: one launch"
    if kind == "vertical":
        shared = sorted(a.writes() & b.reads())
        if a.kind is KernelKind.TEMPLATE:
            return True, f"{b.label} reads {', '.join(shared)} where the template computes " \
                "it: fused as the template's epilogue"
        return True, f"{b.label} reads {', '.join(shared)}; computed in the same loop"
    shared = sorted(a.reads() & b.reads())
    return True, f"both read {', '.join(shared)}; loaded once"


def _epilogue_ok(a: Group, b: Group, kind: str) -> tuple[bool, str]:
    """A template group (a) takes a pointwise consumer (b) that reads what a computes at
    the element it computes itself."""
    if b.kind is KernelKind.TEMPLATE:
        return False, f"{b.label} is a GEMM template: it takes only epilogues after it"
    if kind != "vertical":
        return False, f"{a.label} is a GEMM template: it takes only its consumers as epilogue"
    if any(n.kind is not KernelKind.POINTWISE or n.numel != a.shape[0] for n in b.nodes):
        return False, (f"{b.label} is not pointwise over the template's "
                       f"{a.shape[0]} elements")
    mine = {n.name: n for n in a.nodes}
    for reader in b.nodes:
        variables, _ = body_vars(reader.buffer.data)  # type: ignore[attr-defined]
        for name, indexes in reader.reads.items():
            if name not in mine:
                continue
            src = mine[name]
            want = _own_index(src)
            for index in indexes:
                got = canonical(simplify_index(index, _bounds(reader)), variables,
                                list(reader.ranges))
                if got != want:
                    return False, (f"{reader.name} reads {name} at another element "
                                   f"({sympy_str(index)}) than the one it computes")
    return True, ""


def _recomputes_compared(a: Group, b: Group) -> str:
    """Why one kernel of a and b would recompute a value whose elements a reader compares
    with each other (ir/nodes.py ComputedBuffer.compared), or "" if it would not."""
    nodes = a.nodes + b.nodes
    compared = {n.name for n in nodes if n.kind is KernelKind.POINTWISE
                and getattr(n.buffer, "compared", False)}
    for reader in nodes:
        for name in compared & set(reader.reads):
            if reader.name != name:
                return (f"{reader.name} compares the elements of {name} with each other: it "
                        "loads them as stored (a recomputation may round otherwise)")
    return ""


def _reduces(g: Group) -> bool:
    return any(n.kind.reduces for n in g.nodes)


def _shapes_compatible(s1: tuple[int, int], s2: tuple[int, int]) -> tuple[bool, str]:
    if s1 == s2:
        return True, ""
    (n1, r1), (n2, r2) = s1, s2  # two reductions were refused by can_fuse
    if r1 == 1 and r2 == 1:
        return False, f"different sizes: {n1} vs {n2} elements"
    (x, r), n = (s1, n2) if r1 > 1 else (s2, n1)
    if n in (x * r, x):
        return True, ""
    return False, f"{n} elements fit neither the reduction's {x}x{r} inputs nor its {x} outputs"


def _readers(groups: list[Group]) -> tuple[dict[str, list[Group]], dict[int, int]]:
    """Buffer name -> the groups that read it (in the groups' order), and each group's
    place in `groups` (by id)."""
    readers: dict[str, list[Group]] = {}
    for h in groups:
        for r in h.reads():
            readers.setdefault(r, []).append(h)
    return readers, {id(g): i for i, g in enumerate(groups)}


def _consumers(groups: list[Group]) -> dict[int, list[Group]]:
    """For each group (by id), the other groups that read what it writes."""
    readers, pos = _readers(groups)
    out: dict[int, list[Group]] = {}
    for g in groups:
        found = {id(h): h for w in g.writes() for h in readers.get(w, ()) if h is not g}
        out[id(g)] = sorted(found.values(), key=lambda h: pos[id(h)])  # the groups' order
    return out


def _path_through_other(a: Group, b: Group, consumers: dict[int, list[Group]]) -> str | None:
    """Name a group C with a -> ... -> C -> ... -> b, if there is one."""
    stack = [c for c in consumers[id(a)] if c is not b]
    seen: set[int] = set()
    while stack:
        g = stack.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        if g.writes() & b.reads():
            return g.label
        stack.extend(c for c in consumers[id(g)] if c is not b)
    return None


def _reduction_reads_ok(a: Group, b: Group) -> tuple[bool, str]:
    """Every read of an in-kernel reduction result must be at the reader's own output."""
    nodes = a.nodes + b.nodes
    reductions = {n.name: n for n in nodes if n.kind.reduces}
    if not reductions:
        return True, ""
    first = next(iter(reductions.values()))
    x, r = first.numel, first.rnumel
    for reader in nodes:
        for name, indexes in reader.reads.items():
            if name not in reductions or reader is reductions[name]:
                continue
            red = reductions[name]
            want = _own_index(red)
            for index in indexes:
                got = _x_view(reader, index, x, r)
                if got is None or got != want:
                    return False, (f"{reader.name} reads reduction {name} at another row "
                                   f"({sympy_str(index)}), not the one it computes")
    # Through in-kernel pointwise nodes: a reader recomputes such a node at the index it
    # reads it, so that node's reads of a reduction happen at the composed index (a column
    # sum over values that use per-row statistics reads every row's statistics).
    pointwise = {n.name: n for n in nodes if n.kind is KernelKind.POINTWISE}
    for reader in nodes:
        for name, indexes in reader.reads.items():
            if name not in pointwise or reader is pointwise[name]:
                continue
            for index in indexes:
                for red_name, composite in _through(pointwise, reductions, name, index, 0):
                    red = reductions[red_name]
                    if reader is red:
                        continue
                    want = _own_index(red)
                    got = None if composite is None else \
                        _x_view(reader, simplify_index(composite, _bounds(reader)), x, r)
                    if got is None or got != want:
                        return False, (f"{reader.name} reads {name}, which reads reduction "
                                       f"{red_name} at another row than {reader.name} computes")
    return True, ""


def _through(pointwise: dict[str, SchedNode], reductions: dict[str, SchedNode], name: str,
             index: Any, depth: int) -> list[tuple[str, Any]]:
    """(reduction, index) pairs read by recomputing pointwise node `name` at storage index
    `index`; the index is None where it cannot be composed (then the fusion is refused)."""
    node = pointwise[name]
    lay = node.buffer.layout
    if depth > 8:
        return [(red, None) for red in reductions]
    coords = _coords(index, list(lay.size), list(lay.stride), lay.offset)
    variables, _ = body_vars(node.buffer.data)  # type: ignore[attr-defined]
    out: list[tuple[str, Any]] = []
    for src, idxs in node.reads.items():
        if src not in reductions and src not in pointwise:
            continue
        for j in idxs:
            composed = None if coords is None else \
                j.xreplace(dict(zip(variables, coords)))
            if src in reductions:
                out.append((src, composed))
            elif composed is None:
                out.extend((red, None) for red in reductions)
            else:
                out.extend(_through(pointwise, reductions, src, composed, depth + 1))
    return out


def _coords(index: Any, size: list[int], stride: list[int], offset: Any) -> list[Any] | None:
    """The coordinates of storage position `index` in a buffer laid out densely in some
    dim order (row-major, or channels-last: a batch norm backward's column sums over
    NHWC values read per-channel statistics), else None."""
    if offset:
        return None
    if stride == contiguous_strides(size):
        return decompose(index, size)
    # Outermost first; size-1 dims (any stride, coordinate 0) go innermost.
    order = sorted(range(len(size)), key=lambda d: (size[d] == 1, -stride[d], d))
    dense = contiguous_strides([size[d] for d in order])
    if any(size[d] != 1 and stride[d] != want for d, want in zip(order, dense)):
        return None
    parts = decompose(index, [size[d] for d in order])
    coords: list[Any] = [0] * len(size)
    for d, part in zip(order, parts):
        coords[d] = part
    return coords


def _own_index(node: SchedNode) -> Any:
    """The node's write index, canonical: what a read at its own element must equal."""
    return canonical(node.write_index(), index_vars("i", len(node.ranges)), list(node.ranges))


def _bounds(node: SchedNode) -> dict[Any, int]:
    data = node.buffer.data  # type: ignore[attr-defined]
    variables, rvars = body_vars(data)
    ranges = list(data.ranges) + list(getattr(data, "reduction_ranges", ()))
    return {v: int(n) - 1 for v, n in zip(list(variables) + list(rvars), ranges)}


def _x_view(reader: SchedNode, index: Any, x: int, r: int) -> Any:
    """The read index as a function of the reader's output position, if it is one."""
    ranges = list(reader.ranges)
    variables, reduction_vars = body_vars(reader.buffer.data)  # type: ignore[attr-defined]
    # With the loop bounds, a row read through a view ((768*i0 + i1) // 768 with i1 < 768)
    # is the row itself (i0): a layer norm's normalising pass joins its statistics.
    index = simplify_index(index, _bounds(reader))
    if reader.kind.reduces or reader.numel == x:
        if index.free_symbols & set(reduction_vars):
            return None
        return canonical(index, variables, ranges)
    split = split_point(ranges, x)
    if split is None or any(v in index.free_symbols for v in variables[split:]):
        return None
    return canonical(index, variables[:split], ranges[:split])


def _merge(groups: list[Group], a: Group, b: Group) -> list[Group]:
    merged = Group(sorted(a.nodes + b.nodes, key=lambda n: n.order))
    rest = [g for g in groups if g is not a and g is not b] + [merged]
    return _toposort(rest)


def _toposort(groups: list[Group]) -> list[Group]:
    """Order groups so producers come first, preferring original program order."""
    remaining = sorted(groups, key=lambda g: g.order)
    done: list[Group] = []
    written: set[str] = set()
    all_writes = {w for g in groups for w in g.writes()}
    needs = {id(g): (g.reads() - g.writes()) & all_writes for g in groups}
    while remaining:
        for g in remaining:
            if needs[id(g)] <= written:
                done.append(g)
                written |= g.writes()
                remaining.remove(g)
                break
        else:
            raise RuntimeError("cycle among fused groups")
    return done
