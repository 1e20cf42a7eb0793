"""How OpenMP threads wait between parallel regions: the one rule, read before torch loads.

Our C++ kernels and eager's ATen ops each run OpenMP parallel regions. With OpenMP's
default (active) waiting, a team's threads spin between regions; on a host with fewer free
cores than threads, a region's barrier then waits for spinning threads the kernel has
descheduled. The `run` stage alternates eager and compiled calls, and on a loaded 2-core
host it took 8-17 s instead of 0.2-0.6 s for a 6-block training step. Passive waiting
(threads sleep) is what every sandboxed job gets (server/sandbox/launch.py); the command
line and the tests get it too, so the same compile costs the same wherever it runs.

OpenMP reads the variable once, when its library loads (with torch): set it before.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}


def wait_passively(environ: MutableMapping[str, str] = os.environ) -> None:
    """Passive waiting in `environ`, unless it already says how to wait."""
    for name, value in WAIT.items():
        environ.setdefault(name, value)
