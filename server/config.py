"""The server's configuration: every key, its default, and what it is for.

In: nothing (the environment for the default folders). Out: `default_config()`, the dict
that `create_app(config)` and `build_runtime(config)` start from; docs/server.md lists the
keys. A module of its own so the app, the RQ worker and the CLI read the same defaults
without importing one another.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from kernelscope.server.jobs.quiet import QUIET_S

REPO_DIR = Path(__file__).resolve().parent.parent


def default_database() -> str:
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return str(Path(data_home) / "kernelscope" / "traces.sqlite3")


def default_kernel_cache() -> str:
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return str(Path(cache_home) / "kernelscope" / "server-kernels")


def default_timing_dir() -> str:
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return str(Path(cache_home) / "kernelscope" / "timing")


def default_spool() -> str:
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return str(Path(data_home) / "kernelscope" / "spool")


def default_config() -> dict[str, Any]:
    webui = REPO_DIR / "webui"  # a wheel has it there too (pyproject.toml's package-dir)
    return {
        "DATABASE": default_database(),  # an SQLite file, or a postgresql:// URL
        "QUEUE_URL": None,  # redis://...: jobs go to RQ workers (server/jobs/remote.py)
        "QUEUE_NAME": "kernelscope",  # the RQ queue (and the Redis key prefix)
        "MAX_JOBS": 2,  # workers running at once
        "QUEUE_SIZE": 8,  # jobs waiting; beyond that POST /api/compile answers 503
        "JOB_TIMEOUT_S": 120,  # wall clock per job
        "CPU_LIMIT_S": 300,  # RLIMIT_CPU per worker process (all its threads)
        "MEMORY_LIMIT_MB": 4096,  # RLIMIT_DATA per worker process
        "FILE_SIZE_LIMIT_MB": 256,  # RLIMIT_FSIZE: largest file a worker may write
        "SCRATCH_LIMIT_MB": 1024,  # all files in the job's scratch directory together
        "PROCESS_LIMIT": 512,  # RLIMIT_NPROC (threads included) for the sandbox uid
        "OUTPUT_LIMIT_MB": 16,  # worker stdout (the event stream)
        "EVENT_LIMIT_KB": 4096,  # one event
        "EVENT_COUNT_LIMIT": 1000,  # events per job
        "TRACE_LIMIT_MB": 8,  # a stored trace's head, and each of its parts (a graph)
        "MAX_CODE_BYTES": 64 * 1024,
        "MAX_CONTENT_LENGTH": 1 << 20,
        "UPLOAD_LIMIT_MB": 32,  # POST /api/traces: a recorded run's files together
        "UPLOAD_SLOTS": 1,  # uploads opened at once (each in a child process; 503 beyond)
        "UPLOAD_TIMEOUT_S": 120,  # wall clock (and CPU) of opening one upload
        "UPLOAD_MEMORY_MB": 4096,  # address space of the process that opens it
        "HIGHLIGHT_LIMIT_KB": 256,  # largest /api/highlight source (python, triton, cpp, c)
        "HIGHLIGHT_IR_LIMIT_KB": 2048,  # ... of a lower stage (llvm, ptx, asm, objdump, text)
        "HIGHLIGHT_PROCS": 2,  # highlighting child processes (server/web/hlpool.py)
        "HIGHLIGHT_TIMEOUT_S": 10,  # wall clock of one highlight; the child is killed after
        "HIGHLIGHT_MEMORY_MB": 1024,  # address space of a highlighting child
        "HEARTBEAT_S": 2.0,
        "JOB_RETENTION_S": 900,  # finished jobs stay streamable this long
        # The front half (runs the snippet, writes the capture bundle) and the back half
        # (our code on the bundle). BACK_CMD None: WORKER_CMD runs the whole pipeline in one
        # process, and the trace says every event came from the snippet's process.
        "WORKER_CMD": [sys.executable, "-m", "kernelscope.compiler", "compile"],
        "BACK_CMD": [sys.executable, "-m", "kernelscope.compiler", "stages"],
        "WORKER_THREADS": min(os.cpu_count() or 1, 16),  # OMP_NUM_THREADS in the worker
        "WORKER_ENV": {},  # extra environment variables for the worker
        "WARM_POOL": None,  # warm workers kept started (None: MAX_JOBS; 0: every job cold)
        # imported when warm
        "WARM_IMPORTS": ["torch", "kernelscope.compiler.pipeline", "kernelscope.compiler.cli"],
        "WARM_UP": True,  # warm workers compile a built-in snippet before taking a job
        # A cold job (no warm worker) gets the server's own `source` from the snippet text
        # at once, before its worker has imported torch (server/jobs/early.py).
        "EARLY_SOURCE": True,
        # A running job's stream quiet this long (seconds) gets the server's own `progress`
        # (server/jobs/quiet.py; 0 turns it off).
        "QUIET_S": QUIET_S,
        "KERNEL_CACHE": default_kernel_cache(),  # shared across jobs ("" turns it off)
        # A folder whose one file every worker flocks while it times, so one job times at
        # a time across the workers (compiler/runtime/slot.py; "" turns it off)
        "TIMING_DIR": default_timing_dir(),
        "ISOLATION": "auto",  # "auto", "bubblewrap" (required) or "rlimits-only"
        "CGROUPS": "auto",  # "auto" (per-job cgroups where the host allows) or "off"
        "CGROUP_PARENT": None,  # a delegated cgroup v2 directory for job groups
        "SANDBOX_UID": 65534,  # the uid/gid workers drop to when the server runs as root
        "SANDBOX_GID": 65534,
        "EXTRA_RO_PATHS": [],  # more host paths the sandbox shows read-only
        "SCRATCH_ROOT": None,  # where scratch directories are made (None: the system tmp)
        "REPO_DIR": str(REPO_DIR),
        "WEBUI_DIR": str(webui),
        "SAMPLES_DIR": str(REPO_DIR / "samples"),
        "TRUSTED_HOSTS": None,
        # Fairness: one client (its address as the server sees it; behind a proxy, set
        # PROXY_HOPS) holds at most this many queued or running jobs (429 + Retry-After
        # beyond), and at most this many open event streams; one job, this many streams.
        "CLIENT_JOBS": 2,
        "CLIENT_STREAMS": 16,
        "JOB_STREAMS": 8,
        "CLIENT_CONNECTIONS": 64,  # open connections per client address (gunicorn worker)
        "PROXY_HOPS": 0,  # X-Forwarded-For entries to trust (werkzeug's ProxyFix)
        "SPOOL_DIR": None,  # traces waiting for the database (None: beside the SQLite file)
        # Refuse to run snippets when per-job cgroups are missing (rlimits alone let a
        # shared mapping or tmpfs through). None: on when serving a non-loopback address.
        "STRICT_LIMITS": None,
        "TCP_MEMORY_MB": 256,  # cgroup v1: socket buffers a job may queue (kmem.tcp)
    }
