"""Two stored traces (or a trace and its Inductor follow-up) compared by the FX nodes their
kernels cover: the kernels read out of a trace's events, then compiler/compare/match.py.

In: a trace's events as stored (dicts, as `GET /api/traces/<id>` returns them). Out: the
groups `GET /api/diff/<a>/<b>` answers with, the same the `inductor` event carries.
Torch-free: the web tier calls it on stored traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from kernelscope.compiler.compare.match import Group, KernelRef, match


def stage_data(events: Sequence[dict[str, Any]], stage: str) -> dict[str, Any]:
    found = next((e.get("data") for e in events if e.get("stage") == stage), None)
    return found if isinstance(found, dict) else {}


def ours(events: Sequence[dict[str, Any]]) -> list[KernelRef]:
    """Our kernels of a trace, each graph's in order, with the FX nodes each fuses
    (scheduling) and its time and bytes where `profile` measured them."""
    timed = {(k.get("graph", 0), k.get("name")): k
             for k in stage_data(events, "profile").get("kernels") or [] if isinstance(k, dict)}
    out = []
    for g in stage_data(events, "scheduling").get("graphs") or []:
        for k in g.get("kernels") or []:
            t = timed.get((g.get("id"), k.get("name"))) or timed.get((0, k.get("name"))) or {}
            out.append(KernelRef(str(k.get("name")), g.get("id"), tuple(k.get("origins") or ()),
                                 t.get("ms"), t.get("bytes") or None, str(k.get("kind", ""))))
    return out


def inductor(events: Sequence[dict[str, Any]]) -> list[KernelRef]:
    """Inductor's calls from a trace's `inductor` event (older traces: `profile.inductor`),
    with no FX nodes nor graph where the trace predates Inductor's node mapping."""
    event = stage_data(events, "inductor") or stage_data(events, "profile").get("inductor") or {}
    return [KernelRef(str(k.get("call") or k.get("name")), k.get("graph"),
                      tuple(k.get("nodes") or ()), k.get("ms"), k.get("bytes"),
                      str(k.get("kind", "")))
            for k in event.get("kernels") or [] if isinstance(k, dict)]


def diff(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]] | None) -> list[Group]:
    """Trace a's kernels against trace b's, or, with b None, against a's own Inductor."""
    return match(ours(a), inductor(a) if b is None else ours(b))


def diff_json(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]] | None
              ) -> list[dict[str, Any]]:
    return [asdict(g) for g in diff(a, b)]
