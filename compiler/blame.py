"""Whose words a back-half error carries: the snippet's graph, or the compiler.

In: an exception one of the back half's stages raised (lowering .. profile), and the graphs
rebuilt from the capture bundle. Out: the `error` payload to report.

The back half runs only our code, but the graphs it compiles are the snippet's: an op can
raise with text the snippet chose (an assert's message, a string argument quoted back).
So, in this order:

- a graph that raises when run eagerly here, on its captured inputs, is the snippet's own
  failure: the error's kind is `graph`, which the server labels the snippet's
  (server/jobs/trust.py), whatever stage it surfaced in;
- otherwise the failure is the compiler's, and every string the graphs carry (the only
  snippet text an op can quote) is cut out of its message, traceback and log, so what the
  compiler's label stands on is text the compiler made.

A g++ or Triton build failure is the compiler's at once (the graph is not run again).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from kernelscope.compiler.capture.bundle import BundleGraph, snapshot
from kernelscope.compiler.codegen.backend import BuildError
from kernelscope.compiler.events import types as ev

CUT = "<snippet text>"
MIN_CUT = 3  # shorter strings ("mean", "tanh" are longer) say nothing on their own


def snippet_strings(graphs: Iterable[BundleGraph]) -> list[str]:
    """Every string a graph's arguments carry, longest first."""
    found: set[str] = set()
    for g in graphs:
        for node in g.nodes:
            found.update(_strings([node["args"], node["kwargs"]]))
        found.update(_strings(g.inputs))
    return sorted((s for s in found if len(s) >= MIN_CUT), key=len, reverse=True)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def cut(text: str | None, strings: list[str]) -> str | None:
    """`text` with each of `strings` replaced by a marker."""
    if text is None:
        return None
    for s in strings:
        text = text.replace(s, CUT)
    return text


def eager_failure(graphs: list[tuple[BundleGraph, torch.fx.GraphModule, list[Any]]]
                  ) -> str | None:
    """What the first graph that raises when run eagerly on its captured inputs says."""
    for g, gm, inputs in graphs:
        try:
            with torch.no_grad():
                gm(*[snapshot(a) if isinstance(a, torch.Tensor) else a for a in inputs])
        except Exception as e:  # the graph's own failure, whatever it is
            return f"graph {g.id} raises when run eagerly on its captured inputs: " \
                   f"{type(e).__name__}: {e}"
    return None


def blame(err: ev.Error, e: BaseException,
          graphs: list[tuple[BundleGraph, torch.fx.GraphModule, list[Any]]]) -> ev.Error:
    """The error payload for exception `e`, as the module docstring says."""
    if not isinstance(e, BuildError) and not isinstance(e.__cause__, BuildError):
        said = eager_failure(graphs)
        if said is not None:
            return ev.Error(err.stage, "graph", said[:4000])
    strings = snippet_strings(g for g, _, _ in graphs)
    return dataclasses.replace(err, message=cut(err.message, strings) or "",
                               traceback=cut(err.traceback, strings),
                               log=cut(err.log, strings))
