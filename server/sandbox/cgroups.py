"""Per-job control groups: a memory limit that counts shared memory, and a pids limit.

In: the host's cgroup mounts (/proc/self/mountinfo, /proc/self/cgroup) and, per job, the
limits. Out: a `CgroupSupport` decided once at start-up (shown by /api/health), and for each
job a `JobCgroup` whose `cgroup.procs` files the worker joins between fork and exec.

rlimits are per process and do not count shared memory (a 6 GiB MAP_SHARED|MAP_ANONYMOUS
mapping passed a 4 GiB RLIMIT_DATA) nor tmpfs pages; one uid-wide RLIMIT_NPROC lets one
job's fork bomb starve every other job. A memory cgroup charges every page a job touches,
shmem and tmpfs included, and kills inside the group when it is full; a pids cgroup bounds
the tasks of that one job. Used where the host lets us create groups:

- cgroup v2: a parent whose `cgroup.subtree_control` has (or accepts) `memory` and `pids`:
  `CGROUP_PARENT`, else the server's own group (works when it is the namespace's root, as
  in most containers; under systemd use a unit with `Delegate=yes` and point
  `CGROUP_PARENT` at a child of it);
- cgroup v1 (the legacy `memory` and `pids` hierarchies), when writable (root);
- else none: /api/health says so, and the rlimits remain the only bound.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

CONTROLLERS = ("memory", "pids")


class CgroupVersion(StrEnum):
    """Which cgroups a host gives its jobs: v2 (one parent), v1 (a parent per controller)
    or none (per-process rlimits only)."""

    V2 = "v2"
    V1 = "v1"
    NONE = "none"


@dataclass(frozen=True)
class CgroupSupport:
    """Where job groups are made: v2 (one parent) or v1 (a parent per controller)."""

    version: CgroupVersion
    parents: dict[str, Path] = field(default_factory=dict)  # controller -> parent directory
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "version", CgroupVersion(self.version))

    @property
    def present(self) -> bool:
        """Jobs get a cgroup of their own here."""
        return self.version is not CgroupVersion.NONE

    def to_json(self) -> dict[str, object]:
        return {"version": self.version, "controllers": sorted(self.parents), "note": self.note}


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, fstype, super options) of every cgroup mount."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        parts, rest = left.split(), right.split()
        if len(parts) >= 5 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
            found.append((parts[4], rest[0], rest[2]))
    return found


def _own_groups() -> dict[str, str]:
    """controller (or "" for v2) -> this process's group path, from /proc/self/cgroup."""
    groups: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        _, names, path = line.split(":", 2)
        for name in names.split(",") if names else [""]:
            groups[name] = path
    return groups


def _writable_dir(path: Path) -> bool:
    probe = path / f"kernelscope-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return False
    return True


def _v2(mount: str, own: str, parent: str | None) -> CgroupSupport | None:
    base = Path(parent) if parent else Path(mount) / own.lstrip("/")
    try:
        available = (base / "cgroup.controllers").read_text().split()
    except OSError:
        return None
    if not all(c in available for c in CONTROLLERS):
        return None
    control = base / "cgroup.subtree_control"
    try:
        enabled = control.read_text().split()
        missing = [c for c in CONTROLLERS if c not in enabled]
        if missing:
            control.write_text(" ".join(f"+{c}" for c in missing))
    except OSError:
        return None
    if not _writable_dir(base):
        return None
    return CgroupSupport(CgroupVersion.V2, {c: base for c in CONTROLLERS})


def _v1(mounts: list[tuple[str, str, str]], own: dict[str, str]) -> CgroupSupport | None:
    parents: dict[str, Path] = {}
    for point, fstype, options in mounts:
        if fstype != "cgroup":
            continue
        for controller in CONTROLLERS:
            if controller in options.split(","):
                parents[controller] = Path(point) / own.get(controller, "/").lstrip("/")
    if set(parents) != set(CONTROLLERS) or not all(_writable_dir(p) for p in parents.values()):
        return None
    return CgroupSupport(CgroupVersion.V1, parents)


def probe(parent: str | None = None) -> CgroupSupport:
    """The strongest per-job grouping this host allows (see the module docstring)."""
    mounts, own = _mounts(), _own_groups()
    for point, fstype, _ in mounts:
        if fstype == "cgroup2" and (found := _v2(point, own.get("", "/"), parent)):
            return found
    if found := _v1(mounts, own):
        return found
    why = "no writable cgroup with the memory and pids controllers"
    if any(fstype == "cgroup2" for _, fstype, _ in mounts):
        why += " (cgroup v2: delegate them, e.g. systemd Delegate=yes, and set CGROUP_PARENT)"
    return CgroupSupport(CgroupVersion.NONE,
                         note=why + ": memory and process limits are per-process rlimits")


class JobCgroup:
    """One job's groups (one per controller in v1, one in v2), created with their limits."""

    def __init__(self, support: CgroupSupport, name: str, memory_mb: int, pids: int,
                 tcp_mb: int | None = None) -> None:
        """`tcp_mb`: cgroup v1 charges socket buffers to a group only once its
        `memory.kmem.tcp.limit_in_bytes` is set (v2 always charges them to memory.max):
        without it, 1 GiB queued on loopback sockets went uncounted."""
        self.support = support
        self.dirs: list[Path] = []
        limit = str(memory_mb << 20)
        for _controller, parent in sorted(support.parents.items()):
            path = parent / name
            if path in self.dirs:
                continue
            path.mkdir()
            self.dirs.append(path)
        for path in self.dirs:
            if support.version is CgroupVersion.V2:
                _write(path / "memory.max", limit)
                _write(path / "memory.swap.max", "0", optional=True)
                _write(path / "pids.max", str(pids))
            elif (path / "memory.limit_in_bytes").exists():
                _write(path / "memory.limit_in_bytes", limit)
                _write(path / "memory.memsw.limit_in_bytes", limit, optional=True)
                tcp = str(min(tcp_mb or memory_mb, memory_mb) << 20)
                _write(path / "memory.kmem.tcp.limit_in_bytes", tcp, optional=True)
            else:
                _write(path / "pids.max", str(pids))

    @property
    def procs(self) -> list[str]:
        """The files a new process writes its pid into to join every group."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def oom_killed(self) -> bool:
        """Did the kernel kill a process of this job for going over the memory limit?"""
        for path in self.dirs:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    text = (path / name).read_text()
                except OSError:
                    continue
                for line in text.splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                        return True
        return False

    def kill(self) -> None:
        """SIGKILL every process still in the job's groups."""
        for path in self.dirs:
            if self.support.version is CgroupVersion.V2 and \
                    _write(path / "cgroup.kill", "1", optional=True):
                continue
            for _ in range(20):
                pids = _pids(path)
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.05)

    def remove(self) -> None:
        self.kill()
        for path in self.dirs:
            for _ in range(100):  # a group can only go once its last task has been reaped
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.05)


def sweep(support: CgroupSupport, prefix: str, jobs_root: Path) -> int:
    """Remove job groups (named after their job directory, `prefix...`) left by a server
    that was killed: those with no process left whose job directory under `jobs_root` is
    gone (run after the scratch sweep, which leaves only live jobs' directories), whatever
    their age. A live job's directory exists before its groups are made and after they
    are removed."""
    removed = 0
    for parent in set(support.parents.values()):
        try:
            names = [p for p in parent.iterdir() if p.is_dir() and p.name.startswith(prefix)]
        except OSError:
            continue
        for path in names:
            if _pids(path) or (jobs_root / path.name.removesuffix("-back")).exists():
                continue
            try:
                path.rmdir()
                removed += 1
            except OSError:
                continue
    return removed


def join(procs: list[str]) -> None:
    """Between fork and exec: move the calling process into the job's groups."""
    pid = str(os.getpid())
    for path in procs:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, pid.encode())
        finally:
            os.close(fd)


def _pids(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _write(path: Path, value: str, optional: bool = False) -> bool:
    try:
        path.write_text(value)
    except OSError:
        if not optional:
            raise
        return False
    return True
