"""The parts a server process runs jobs with, built once from its configuration.

In: a configuration dict (the keys of server/config.py; missing keys take the defaults).
Out: a `Runtime`: the trace store (spooling while its database is down), the worker
settings (sandbox probe, limits, commands), the warm pool and the shared kernel cache.
`create_app` builds one for the web tier and the RQ worker (`kernelscope worker`) builds
one for itself, so both run jobs with the very same parts and neither needs the other.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelscope.compiler.runtime.slot import LOCK_ENV
from kernelscope.server.config import default_config, default_spool
from kernelscope.server.jobs.kcache import KernelCache, shared_kernel_cache
from kernelscope.server.jobs.pool import WarmPool
from kernelscope.server.jobs.worker import WorkerSettings
from kernelscope.server.sandbox import cgroups, scratch
from kernelscope.server.sandbox.launch import (
    Limits,
    SandboxSpec,
    default_readonly_paths,
    probe_isolation,
)
from kernelscope.server.store.rows import Store
from kernelscope.server.store.spool import SpoolingStore
from kernelscope.server.store.sqlite import is_url, open_store

log = logging.getLogger(__name__)


class LimitsUnavailable(RuntimeError):
    """Strict mode, on a host where the per-job limits cannot be set up."""


@dataclass(frozen=True)
class Runtime:
    config: dict[str, Any]
    store: Store
    settings: WorkerSettings
    pool: WarmPool | None  # None: jobs run elsewhere (the web tier of a queue), or pool 0
    kcache: KernelCache | None


def sandbox_spec(cfg: Mapping[str, Any]) -> SandboxSpec:
    repo = Path(cfg["REPO_DIR"])
    db = "" if is_url(cfg["DATABASE"]) else str(Path(cfg["DATABASE"]).resolve())
    spool = str(Path(cfg["SPOOL_DIR"]).resolve()) if cfg.get("SPOOL_DIR") else ""
    return SandboxSpec(
        readonly=default_readonly_paths(repo, cfg["EXTRA_RO_PATHS"]),
        hidden=tuple(p for p in (os.path.dirname(db), spool) if p),
        masked=(db, db + "-wal", db + "-shm", db + "-journal") if db else (),
        env={str(k): str(v) for k, v in cfg["WORKER_ENV"].items()},
        threads=int(cfg["WORKER_THREADS"]),
    )


def _store(cfg: dict[str, Any]) -> SpoolingStore:
    if not cfg.get("SPOOL_DIR"):
        # One folder per database, never beside it: a folder the sandbox shows would show
        # the spool too (it holds other people's code until the database takes it).
        key = hashlib.sha256(str(cfg["DATABASE"]).encode()).hexdigest()[:16]
        cfg["SPOOL_DIR"] = str(Path(default_spool()) / key)
    store = SpoolingStore(open_store(cfg["DATABASE"]), cfg["SPOOL_DIR"])
    store.flush(force=True)  # what a stopped server could not write
    return store


def _timing_lock(cfg: dict[str, Any]) -> None:
    """The host's timing lock: a file the workers see read-only (flock needs no write) and
    find through KERNELSCOPE_TIMING_LOCK; one timing at a time across them."""
    if not cfg.get("TIMING_DIR"):
        return
    folder = Path(cfg["TIMING_DIR"])
    folder.mkdir(parents=True, exist_ok=True, mode=0o755)
    lock = folder / "timing.lock"
    lock.touch(mode=0o644, exist_ok=True)
    cfg["EXTRA_RO_PATHS"] = [*cfg["EXTRA_RO_PATHS"], str(folder)]
    cfg["WORKER_ENV"] = {**cfg["WORKER_ENV"], LOCK_ENV: str(lock)}


def build_settings(cfg: dict[str, Any]) -> WorkerSettings:
    """Probe the sandbox and the cgroups; in strict mode, refuse a host without them."""
    limits = Limits.from_config(cfg)
    if cfg["KERNEL_CACHE"]:
        # Jobs see the shared kernel cache read-only (server/jobs/kcache.py).
        Path(cfg["KERNEL_CACHE"]).mkdir(parents=True, exist_ok=True, mode=0o755)
        cfg["EXTRA_RO_PATHS"] = [*cfg["EXTRA_RO_PATHS"], str(cfg["KERNEL_CACHE"])]
    _timing_lock(cfg)
    spec = sandbox_spec(cfg)
    repo = Path(cfg["REPO_DIR"])
    groups = (
        cgroups.probe(cfg["CGROUP_PARENT"]) if cfg["CGROUPS"] != "off"
        else cgroups.CgroupSupport(cgroups.CgroupVersion.NONE,
                                   note="per-job cgroups are off (CGROUPS='off')")
    )
    isolation = probe_isolation(
        cfg["ISOLATION"], spec, limits, repo, int(cfg["SANDBOX_UID"]), int(cfg["SANDBOX_GID"]),
        groups,
    )
    if cfg.get("STRICT_LIMITS"):
        missing = []
        if not groups.present:
            missing.append(f"per-job cgroups ({groups.note})")
        if not isolation.bubblewrap:
            missing.append("the bubblewrap sandbox")
        if missing:
            raise LimitsUnavailable(
                "strict mode refuses to run snippets without " + " and ".join(missing)
                + "; run as root or delegate cgroups, or set STRICT_LIMITS false "
                "(--no-strict) on a machine only you can reach")
    # Whatever their age: a job is dead when its lock is free (server/sandbox/scratch.py).
    swept = scratch.sweep(cfg["SCRATCH_ROOT"])
    jobs_root = Path(cfg["SCRATCH_ROOT"] or tempfile.gettempdir())
    swept += cgroups.sweep(groups, scratch.root_prefix(jobs_root), jobs_root)
    if swept:
        log.warning("removed %d job directories and cgroups left by a stopped server", swept)
    for note in isolation.notes:
        log.warning("sandbox: %s", note)
    return WorkerSettings(
        command=tuple(cfg["WORKER_CMD"]),
        isolation=isolation,
        spec=spec,
        limits=limits,
        repo_dir=repo,
        scratch_root=cfg["SCRATCH_ROOT"],
        back_command=tuple(cfg["BACK_CMD"]) if cfg["BACK_CMD"] else None,
        early_source=bool(cfg["EARLY_SOURCE"]),
        quiet_s=float(cfg["QUIET_S"]),
    )


def build_runtime(config: Mapping[str, Any] | None = None, runs_jobs: bool = True) -> Runtime:
    """Everything a process needs to run jobs. `runs_jobs` False (a web tier whose jobs go
    to a queue): no warm pool and no kernel cache here."""
    cfg = {**default_config(), **(config or {})}
    store = _store(cfg)  # before the sandbox probe: the probe hides the database's folder
    settings = build_settings(cfg)
    if not runs_jobs:
        return Runtime(cfg, store, settings, None, None)
    kcache = shared_kernel_cache(cfg["KERNEL_CACHE"], settings)
    if cfg["KERNEL_CACHE"] and kcache is None:
        log.warning("kernel cache: not shared (a job could write it)")
    size = int(cfg["MAX_JOBS"] if cfg["WARM_POOL"] is None else cfg["WARM_POOL"])
    pool = WarmPool(settings, size, list(cfg["WARM_IMPORTS"]), bool(cfg["WARM_UP"]),
                    kcache=kcache)
    return Runtime(cfg, store, settings, pool, kcache)
