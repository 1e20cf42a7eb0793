"""Choosing what each matrix product runs as: the extern call or a GEMM template config.

After lowering, every `MatmulTemplate` (ir/template.py) is decided here, before the
scheduler sees it (a chosen template becomes a kernel its consumers fuse into). By default
(`matmul="heuristic"`, as Inductor without max-autotune) nothing is timed: a choice
measured before for the same product (this machine's cache, or the server's, which every
measuring job fills: server/jobs/kcache.py) is taken as it was measured, and otherwise the
extern call (cuBLAS), which a cold explorer job would spend seconds of GPU time to beat.
With `matmul="measure"` ("auto" is its old name) and real kernels (a GPU), the extern call
and each template config the backend offers are run once on random operands of the
product's real shapes, strides and dtype (as Inductor's max-autotune does); a config whose
values are not the extern call's (at the dtype's tolerance) or that fails to build is
dropped, with why; the fastest stays. The times are kept on disk (runtime/results.py),
keyed by the shapes, strides, dtype, device name, the template's source and the tool
versions, so a product is measured once per machine; in the explorer the server shares
them across jobs from the back half only (server/jobs/kcache.py). "template" takes the
first config unmeasured and "extern" the extern call (deterministic, for tests); where
kernels are emulated nothing is measured and the extern call stays.

In: a LoweredGraph and its backend. Out: `chosen` set on each template, and one
TemplateSelection per product for the scheduling event.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen.backend import Backend
from kernelscope.compiler.events.types import TemplateChoice, TemplateSelection
from kernelscope.compiler.ir.nodes import Layout
from kernelscope.compiler.ir.template import MatmulTemplate, TemplateConfig
from kernelscope.compiler.lowering.graph import LoweredGraph
from kernelscope.compiler.options import CompileOptions
from kernelscope.compiler.runtime import template_bench
from kernelscope.compiler.runtime.cache import cache_root, content_key, device_name, write_atomic
from kernelscope.compiler.runtime.results import read_result, result_path

EXTERN = "extern"
CACHE_VERSION = "1"  # bump when what a cached entry means changes
MEASURE = ("measure", "auto")  # the matmul option's values that time the candidates


def select_templates(lowered: LoweredGraph, backend: Backend, options: CompileOptions
                     ) -> list[TemplateSelection]:
    bufs = [b for b in lowered.buffers if isinstance(b, MatmulTemplate)]
    for buf in bufs:
        m, n, k = buf.mnk
        buf.configs = tuple(backend.template_configs(m, n, k, buf.dtype))
    # The products to measure (no cached times): their candidates build in parallel
    # first, then each is timed alone.
    pending = [b for b in bufs if b.configs and options.matmul in MEASURE
               and not backend.emulated and read_result(cache_path(b, backend, options)) is None]
    modules: template_bench.Modules = {}
    if pending:
        modules, _ = template_bench.precompile(pending, backend, options.compile_workers)
    return [_select(buf, backend, options, modules) for buf in bufs]


def _select(buf: MatmulTemplate, backend: Backend, options: CompileOptions,
            modules: template_bench.Modules) -> TemplateSelection:
    choices = [TemplateChoice(EXTERN)] + [TemplateChoice(c.name, None, c.to_json())
                                             for c in buf.configs]
    sel = TemplateSelection(buf.name, buf.summary, sorted(buf.origins), EXTERN, "",
                               choices)
    if not buf.configs:
        sel.reason = "no template config fits this product: the extern call"
    elif options.matmul == "template":
        _choose(buf, sel, buf.configs[0], "the matmul option asks for the template "
                                          "(its first config, unmeasured)")
    elif options.matmul not in (*MEASURE, "heuristic"):
        sel.reason = f"the matmul option is {options.matmul!r}: the extern call"
    elif backend.emulated:
        sel.reason = ("kernels run emulated here, so nothing is measured: the extern call "
                      "(matmul='template' forces the template)")
    elif options.matmul == "heuristic":
        _heuristic(buf, sel, backend, options)
    else:
        _measured(buf, sel, backend, options, modules)
    buf.choice_reason = sel.reason
    return sel


def _choose(buf: MatmulTemplate, sel: TemplateSelection, config: TemplateConfig,
            reason: str) -> None:
    buf.chosen = config
    sel.chosen, sel.reason = config.name, reason


def _heuristic(buf: MatmulTemplate, sel: TemplateSelection, backend: Backend,
               options: CompileOptions) -> None:
    """No timing: a choice measured before for this product, else the extern call."""
    entry = read_result(cache_path(buf, backend, options))
    sel.cache_hit = entry is not None
    if entry is None:
        sel.reason = ("not measured (matmul='heuristic'): the extern call; "
                      "matmul='measure' times the template's configs, as max-autotune does")
        return
    _take(buf, sel, entry)
    sel.reason = f"measured before, cached: {sel.reason}"


def _measured(buf: MatmulTemplate, sel: TemplateSelection, backend: Backend,
              options: CompileOptions, modules: template_bench.Modules) -> None:
    path = cache_path(buf, backend, options)
    entry = read_result(path)
    sel.cache_hit = entry is not None
    if entry is None:
        try:
            entry = template_bench.measure(buf, backend, modules)
        except Exception as e:  # the measurement itself failed: say so, keep the extern call
            sel.reason = f"measuring failed ({type(e).__name__}: {str(e)[:300]}): the extern call"
            return
        write_atomic(path, json.dumps(entry, sort_keys=True))
    _take(buf, sel, entry)


def _take(buf: MatmulTemplate, sel: TemplateSelection, entry: dict[str, Any]) -> None:
    """The fastest of a measurement's choices (the extern call wins ties)."""
    times: dict[str, float] = entry.get("ms", {})
    errors: dict[str, str] = entry.get("errors", {})
    for c in sel.choices:
        c.ms = times.get(c.name)
        c.error = errors.get(c.name)
    buf.timings = dict(times)
    if EXTERN not in times:
        sel.reason = "the extern call could not be timed: kept, nothing compared"
        return
    best = min(times, key=lambda name: (times[name], name != EXTERN))
    by_name = {c.name: c for c in buf.configs}
    if best == EXTERN or best not in by_name:
        sel.reason = f"the extern call is fastest ({times[EXTERN]:.4g} ms)"
        return
    _choose(buf, sel, by_name[best], f"template {best} is fastest: {times[best]:.4g} ms "
                                     f"against the extern call's {times[EXTERN]:.4g} ms")


def cache_path(buf: MatmulTemplate, backend: Backend, options: CompileOptions) -> Path:
    return result_path(cache_root(options.cache_dir), "mm", autotune_key(buf, backend))


def autotune_key(buf: MatmulTemplate, backend: Backend) -> str:
    assert buf.a is not None and buf.b is not None
    facts = {"op": str(buf.op), "a": _lay(buf.a.view), "b": _lay(buf.b.view),
             "out": _lay(buf.layout), "dtype": str(buf.dtype), "backend": backend.name,
             "device": device_name(backend.device), "configs": [c.name for c in buf.configs],
             "template": _template_source(), "version": CACHE_VERSION}
    return content_key(json.dumps(facts, sort_keys=True))


def _lay(lay: Layout) -> list[Any]:
    return [list(lay.size), list(lay.stride), lay.offset]


def _template_source() -> str:
    """The template's generator, by content: a changed template is measured again."""
    here = Path(__file__).resolve().parents[1] / "codegen" / "triton" / "template.py"
    return hashlib.sha256(here.read_bytes()).hexdigest()[:16]

