"""The first event of a cold job: `source` from the snippet text, before any worker runs.

A warm worker (server/jobs/pool.py) has torch imported already and sends its own `source`
within milliseconds; a cold one (`--pool 0`, or a pool with none ready) first spends
seconds importing torch, and the page would show nothing meanwhile. So for a cold job the
server publishes `source` itself the moment the job starts, from what it already has: the
submitted code (the same text, so every line a later event names is the same line), the
request's options and entry, the backend "auto" resolves to, and the package versions;
`origin: "server"`. What only running the snippet can tell (the entry it found, its
inputs, what it printed) comes in the front's own `source` after it: a cold job's stream
has two `source` events, and a reader keeps the last (docs/events.md).
"""

from __future__ import annotations

from typing import Any

from kernelscope.compiler.codegen import targets
from kernelscope.server.jobs import info
from kernelscope.server.jobs.manager import JobRequest

FILENAME = "snippet.py"  # what the worker calls the snippet (server/jobs/worker.py)


def early_source(request: JobRequest) -> dict[str, Any]:
    """The `source` payload the server can state before the snippet runs (every field the
    Source type requires; `inputs` empty: they are the snippet's, not known yet)."""
    opts = request.options
    device = str(opts["device"])
    try:
        target: targets.Target | None = targets.resolve(str(opts["backend"]), device)
    except ValueError:
        target = None  # the worker says why in its error
    emulated = target is not None and target.emulated_on(device)
    versions = info.versions()
    return {
        "code": request.code, "filename": FILENAME, "entry": request.entry or "",
        "entry_line": None, "inputs": [], "device": device,
        "backend": target.name if target is not None else str(opts["backend"]),
        "backend_label": target.label if target is not None else "",
        "emulated": emulated, "triton_interpret": emulated, "options": dict(opts),
        "versions": {"python": versions["python"], "torch": versions["torch"] or "",
                     "triton": versions["triton"], "gpu": None,
                     "kernelscope": versions["kernelscope"] or ""},
        "stdout": "",
    }
