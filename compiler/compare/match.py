"""The one FX-node matcher: two sides' kernels grouped by the FX nodes they cover.

In: each side's kernels as `KernelRef`s (name, graph id, the FX nodes it computes, its time
and bytes where known). Out: `Group`s. A group joins every kernel of either side (same
graph) that shares an FX node with another kernel of the group, so a fused kernel of one
side faces the set of kernels the other side used for the same nodes; a kernel that covers
no FX node stands alone. Each group carries both sides' kernel names, summed times (None
unless every kernel of that side was timed) and summed bytes, and how the sides relate:

    same FX nodes     one kernel each side, covering the same nodes
    A fuses more      one kernel of A against several of B
    B fuses more      several of A against one of B
    regrouped         several against several (the nodes cut differently)
    only A / only B   nodes one side computes in a kernel and the other does not

Used by the `inductor` event (ours against Inductor, compiler/runtime/inductor.py), by the
diff of two stored traces (`GET /api/diff/<a>/<b>`), and by the TORCH_TRACE reader. Pure
functions over plain data; the UI only draws the result.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class KernelRef:
    name: str
    graph: int | None  # None: not known which graph (its nodes match nothing)
    nodes: tuple[str, ...] = ()
    ms: float | None = None
    bytes: int | None = None
    kind: str = ""


@dataclass
class Group:
    graph: int | None
    nodes: list[str]
    a: list[str]
    b: list[str]
    how: str
    a_ms: float | None = None
    b_ms: float | None = None
    a_bytes: int | None = None
    b_bytes: int | None = None


def relation(a: int, b: int) -> str:
    if a and not b:
        return "only A"
    if b and not a:
        return "only B"
    if a == 1 and b == 1:
        return "same FX nodes"
    if a == 1:
        return "A fuses more"
    if b == 1:
        return "B fuses more"
    return "regrouped"


def match(a: Sequence[KernelRef], b: Sequence[KernelRef]) -> list[Group]:
    """Both sides' kernels in groups by shared FX nodes, in the order the groups first
    appear (A's kernels first, then B's)."""
    items = [("a", k) for k in a] + [("b", k) for k in b]
    keys = [(k.graph, k.nodes if k.graph is not None else ()) for _, k in items]
    return [_group([items[i] for i in idx]) for idx in node_groups(keys)]


def node_groups(keys: Sequence[tuple[object, Iterable[str]]]) -> list[list[int]]:
    """The indices of items that share an FX node of one graph (`keys[i]`: item i's graph
    and FX nodes), grouped through any chain of shared nodes, each group in the order its
    items appear and the groups in the order of their first items."""
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[object, str], int] = {}
    for i, (graph, nodes) in enumerate(keys):
        for node in nodes:
            parent[find(i)] = find(owner.setdefault((graph, node), i))
    members: dict[int, list[int]] = {}
    for i in range(len(keys)):
        members.setdefault(find(i), []).append(i)
    return list(members.values())


def _group(items: list[tuple[str, KernelRef]]) -> Group:
    side_a = [k for s, k in items if s == "a"]
    side_b = [k for s, k in items if s == "b"]
    nodes: list[str] = []
    for _, k in items:
        nodes += [n for n in k.nodes if n not in nodes]
    return Group(graph=items[0][1].graph, nodes=nodes, a=[k.name for k in side_a],
                 b=[k.name for k in side_b], how=relation(len(side_a), len(side_b)),
                 a_ms=_ms(k.ms for k in side_a), b_ms=_ms(k.ms for k in side_b),
                 a_bytes=_total(k.bytes for k in side_a),
                 b_bytes=_total(k.bytes for k in side_b))


def _total(values: Iterable[Any]) -> Any:
    """The sum, or None where a value is not known (or there is none)."""
    xs = list(values)
    return None if not xs or None in xs else sum(xs)


def _ms(values: Iterable[float | None]) -> float | None:
    total = _total(values)
    return None if total is None else round(total, 4)


def summary(groups: Sequence[Group]) -> dict[str, int]:
    """How many groups of each relation (the page's one-line account)."""
    return dict(Counter(g.how for g in groups))
