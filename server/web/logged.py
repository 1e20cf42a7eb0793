"""A TORCH_TRACE log's stored trace read for one of its graphs: its head and the one part
that holds that graph (a big log's trace is stored in parts, one per compile id:
server/store/parts.py), never the whole trace. For the routes that rebuild a logged graph
(`GET /api/traces/<id>/graphs/<g>/rebuild`) and compare a rebuild with the log
(`GET /api/diff/<rebuild>/<log>`), server/web/api.py.
"""

from __future__ import annotations

import json
from typing import Any

from kernelscope.compiler.events.read import envelope
from kernelscope.server.jobs.relay import off_loop
from kernelscope.server.store.parts import is_stub, merge
from kernelscope.server.web.appstate import app_state


def with_graph(trace_id: str, graph: int) -> list[dict[str, Any]] | None:
    """The trace's events with graph `graph` whole (its part merged into the head); None: no
    such trace."""
    store = app_state().store
    found = store.head(trace_id)
    if found is None:
        return None
    events: list[dict[str, Any]] = found["events"]
    capture: dict[str, Any] = next(
        (envelope(e).data for e in events if envelope(e).stage == "capture"), {})
    key = next((g.get("part") for g in capture.get("graphs") or []
                if is_stub(g) and g.get("id") == graph), None)
    text = store.part(trace_id, str(key)) if key is not None else None
    if text is not None:
        merge(events, off_loop(json.loads, text.encode()))
    return events
