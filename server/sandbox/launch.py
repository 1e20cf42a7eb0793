"""How one compile job is isolated from the host.

In: the worker argv (the compiler CLI), a scratch directory, the configured limits.
Out: a `Launch` (argv, env, cwd, preexec) that starts the worker inside the sandbox, and an
`Isolation` record saying which isolation is active (shown by /api/health).

Two layers, described in docs/server.md:

- rlimits, always: CPU seconds, data segment (memory), file size, process count, no core
  dumps; the worker gets its own session so its whole process group can be killed.
- bubblewrap, when `bwrap` is installed and a probe run succeeds: new mount, pid, network,
  ipc and uts namespaces. Only /usr, /etc, /sys, the Python installation and the repository
  are visible, read-only; the scratch directory is the one writable place (it also backs
  /tmp and /dev/shm, so nothing fills RAM-backed tmpfs). The user's home and the server's
  database are simply not there.

When the server runs as root the worker drops to an unprivileged uid (nobody) with
`setpriv` once the namespaces are built, because RLIMIT_NPROC never limits root, and root
could remount the read-only views.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from kernelscope.compiler.runtime import openmp
from kernelscope.server.sandbox.cgroups import CgroupSupport, CgroupVersion, join
from kernelscope.server.sandbox.scratch import JobDir, remove_tree
from kernelscope.server.sandbox.seccomp import build_filter, filter_fd

INNER_SCRATCH = "/scratch"
PASSTHROUGH_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH")
MASKED_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
MiB = 1 << 20


@dataclass(frozen=True)
class Limits:
    """Per-job resource limits; see docs/server.md for what each one stops."""

    wall_s: float = 120.0
    cpu_s: int = 300
    memory_mb: int = 4096
    file_mb: int = 256
    scratch_mb: int = 1024
    processes: int = 512
    output_mb: int = 16
    event_kb: int = 4096  # one event (one NDJSON line)
    events: int = 1000  # events per job
    trace_mb: int = 8  # a stored trace's head, and each of its parts (a graph)
    tcp_mb: int = 256  # socket buffers (cgroup v1 kmem.tcp; v2 counts them in memory)

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Limits:
        return cls(
            wall_s=float(cfg["JOB_TIMEOUT_S"]),
            cpu_s=int(cfg["CPU_LIMIT_S"]),
            memory_mb=int(cfg["MEMORY_LIMIT_MB"]),
            file_mb=int(cfg["FILE_SIZE_LIMIT_MB"]),
            scratch_mb=int(cfg["SCRATCH_LIMIT_MB"]),
            processes=int(cfg["PROCESS_LIMIT"]),
            output_mb=int(cfg["OUTPUT_LIMIT_MB"]),
            event_kb=int(cfg["EVENT_LIMIT_KB"]),
            events=int(cfg["EVENT_COUNT_LIMIT"]),
            trace_mb=int(cfg["TRACE_LIMIT_MB"]),
            tcp_mb=int(cfg.get("TCP_MEMORY_MB", 256)),
        )


class IsolationMode(StrEnum):
    """How a job is isolated: bubblewrap (namespaces, seccomp, its own mounts) and the
    rlimits, or the rlimits only."""

    BUBBLEWRAP = "bubblewrap"
    RLIMITS_ONLY = "rlimits-only"


@dataclass(frozen=True)
class Isolation:
    """Which isolation the host allows, decided once when the app starts."""

    mode: IsolationMode
    bwrap: str | None = None
    setpriv: str | None = None
    uid: int | None = None  # drop to this uid/gid (only when the server runs as root)
    gid: int | None = None
    notes: tuple[str, ...] = ()
    cgroups: CgroupSupport = field(default_factory=lambda: CgroupSupport(CgroupVersion.NONE))
    seccomp: bytes | None = None  # the BPF program bubblewrap loads (server/sandbox/seccomp.py)
    tmpfs: bool = False  # each job's scratch is a tmpfs of the scratch budget (root only)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", IsolationMode(self.mode))

    @property
    def bubblewrap(self) -> bool:
        """Jobs run inside bubblewrap (their own mounts, namespaces and seccomp)."""
        return self.mode is IsolationMode.BUBBLEWRAP

    def to_json(self) -> dict[str, Any]:
        user = "unchanged" if self.uid is None else f"uid {self.uid}"
        return {
            "mode": self.mode,
            "worker_user": user,
            "cgroup": self.cgroups.to_json(),
            "seccomp": self.seccomp is not None,
            "scratch": "tmpfs" if self.tmpfs else "disk (walked every second)",
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Launch:
    """Everything subprocess.Popen needs to start one sandboxed worker."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    preexec: Callable[[], None]
    user: int | None = None
    group: int | None = None
    pass_fds: tuple[int, ...] = ()

    def start(self, stdin: Any, stderr: Any, events_w: int,
              preexec: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
        """Start the worker in its own session, its stdout a pipe, the event channel's
        write end `events_w` passed on; `preexec` replaces the launch's own."""
        return subprocess.Popen(
            self.argv,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            pass_fds=(events_w, *self.pass_fds),
            preexec_fn=preexec or self.preexec,  # noqa: PLW1509 - cgroup join, setrlimit, nice
            user=self.user,
            group=self.group,
            extra_groups=[] if self.user is not None else None,
        )


@contextlib.contextmanager
def event_channel(iso: Any) -> Iterator[tuple[int, int, int | None]]:
    """The pipe a worker writes its events to, and its seccomp filter's fd, around the
    worker's start: the read end is the caller's once the block succeeds; the write end
    and the filter (the worker holds its own copies) are closed after it either way."""
    events_r, events_w = os.pipe()
    seccomp_fd = filter_fd(iso.seccomp) if iso.seccomp is not None else None
    try:
        yield events_r, events_w, seccomp_fd
    except BaseException:
        os.close(events_r)
        raise
    finally:
        os.close(events_w)
        if seccomp_fd is not None:
            os.close(seccomp_fd)


@dataclass(frozen=True)
class SandboxSpec:
    """What the sandbox shows the worker: read-only paths, hidden paths, extra env."""

    readonly: tuple[str, ...]
    hidden: tuple[str, ...] = ()  # directories replaced by an empty tmpfs
    masked: tuple[str, ...] = ()  # files replaced by an unreadable node
    env: dict[str, str] = field(default_factory=dict)
    threads: int = 4


def python_paths(repo_dir: Path) -> list[str]:
    """The directories a worker's Python imports from (its sys.path, .pth files included)."""
    probe = "import json, sys; print(json.dumps([p for p in sys.path if p]))"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(repo_dir)}
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(
            [sys.executable, "-c", probe],
            check=False,
            env=env,
            cwd=cwd,
            capture_output=True,
            timeout=60,
        )
    if done.returncode != 0:
        return [p for p in sys.path[1:] if p]
    return [str(p) for p in json.loads(done.stdout)]


def default_readonly_paths(repo_dir: Path, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The Python installation (prefixes and the worker's sys.path) and the repository."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, str(repo_dir)}
    paths |= {os.path.dirname(p) if p.endswith(".zip") else p for p in python_paths(repo_dir)}
    paths |= set(extra)
    paths |= {os.path.realpath(p) for p in paths}
    return tuple(sorted(os.path.abspath(p) for p in paths if os.path.exists(p)))


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _minimal(paths: Iterable[str]) -> list[str]:
    """Drop paths that lie under another path of the set, or under /usr and /etc."""
    base = ["/usr", "/etc", "/sys"]
    kept: list[str] = []
    for p in sorted(set(paths)):
        if any(_under(p, b) for b in base + kept):
            continue
        kept.append(p)
    return kept


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parents
    return [str(p) for p in reversed(list(parts)) if str(p) != "/"]


def _children_except_database(folder: str, spec: SandboxSpec) -> list[str]:
    """A visible folder that also holds the database (`--db` in a checkout): bind its
    entries one by one, leaving out the database and every file SQLite keeps next to it
    (`-wal`, `-shm`, `-journal`, whether or not they exist yet)."""
    names = {os.path.basename(m) for m in spec.masked}
    stems = tuple(n for n in names if not n.endswith(("-wal", "-shm", "-journal")))
    args = ["--perms", "0755", "--dir", folder]
    for name in sorted(os.listdir(folder)):
        if name in names or name.startswith(stems):
            continue
        source = os.path.join(folder, name)
        args += ["--ro-bind", os.path.realpath(source), source]
    return args


def bwrap_args(
    bwrap: str, scratch: Path, spec: SandboxSpec, as_root: bool, seccomp_fd: int | None = None
) -> list[str]:
    """The bubblewrap command line, up to (not including) the worker argv.

    The writable binds come first, so a read-only path that lies under /tmp (a checkout or
    a virtualenv there) is mounted on top of the job's /tmp instead of being hidden by it.
    """
    args = [bwrap, "--dev", "/dev", "--proc", "/proc"]
    writable = ((scratch, INNER_SCRATCH), (scratch / "tmp", "/tmp"), (scratch / "shm", "/dev/shm"))
    for source, dest in writable:
        args += ["--bind", str(source), dest]
    args += ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = f"/{name}"
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for masked in MASKED_FILES:
        if os.path.exists(masked):
            args += ["--ro-bind", "/dev/null", masked]
    args += ["--ro-bind-try", "/sys", "/sys"]
    if os.path.isdir("/sys/fs/cgroup"):
        # Other jobs' cgroups (their names and usage) are no business of this one.
        args += ["--tmpfs", "/sys/fs/cgroup", "--remount-ro", "/sys/fs/cgroup"]
    made: set[str] = set()
    for path in _minimal(spec.readonly):
        for anc in _ancestors(path):
            if anc not in made:
                args += ["--perms", "0755", "--dir", anc]
                made.add(anc)
        if path in spec.hidden:
            args += _children_except_database(path, spec)
        else:
            args += ["--ro-bind", os.path.realpath(path), path]
    for hidden in spec.hidden:
        inside = any(_under(hidden, p) for p in spec.readonly)
        if inside and not any(_under(p, hidden) for p in spec.readonly):
            args += ["--tmpfs", hidden]
    for masked in spec.masked:
        if os.path.dirname(masked) in spec.hidden and os.path.dirname(masked) in spec.readonly:
            continue  # left out of that folder's entries altogether
        if os.path.exists(masked) and any(_under(masked, p) for p in spec.readonly):
            args += ["--ro-bind", "/dev/null", masked]
    for node in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", node, node]
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--die-with-parent", "--chdir", INNER_SCRATCH, "--clearenv"]
    if not as_root:
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args


def worker_env(scratch: str, spec: SandboxSpec, repo_dir: Path) -> dict[str, str]:
    """A minimal environment: no secrets from the server's own environment."""
    cache = f"{scratch}/cache"
    env = {
        "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": "/tmp" if scratch == INNER_SCRATCH else f"{scratch}/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(repo_dir),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "XDG_CACHE_HOME": cache,
        "KERNELSCOPE_CACHE": f"{cache}/kernelscope",
        "TRITON_CACHE_DIR": f"{cache}/triton",
        "TORCHINDUCTOR_CACHE_DIR": f"{cache}/inductor",
        "OMP_NUM_THREADS": str(spec.threads),
        # Jobs run side by side on shared cores: OpenMP threads that spin between parallel
        # regions would take those cores from the other job and skew its CPU timings.
        **openmp.WAIT,
    }
    env |= {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env |= spec.env
    return env


def count_user_tasks(uid: int) -> int:
    """Threads currently owned by `uid` (what RLIMIT_NPROC counts)."""
    total = 0
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            fields = dict(
                line.split(":", 1) for line in Path(status).read_text().splitlines() if ":" in line
            )
            if int(fields["Uid"].split()[0]) == uid:
                total += int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return total


def rlimit_preexec(
    limits: Limits, nproc: int, cgroup_procs: Iterable[str] = ()
) -> Callable[[], None]:
    """The function run in the child between fork and exec: join the job's cgroups, then
    only setrlimit calls.

    In a pids cgroup the job's own `pids.max` bounds its tasks, so RLIMIT_NPROC (one count
    for every job of the sandbox uid: one job's fork bomb starved the others) is not set.
    """
    procs = list(cgroup_procs)
    pairs = [
        (resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5)),
        (resource.RLIMIT_DATA, (limits.memory_mb * MiB, limits.memory_mb * MiB)),
        (resource.RLIMIT_FSIZE, (limits.file_mb * MiB, limits.file_mb * MiB)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
    if not procs:
        pairs.append((resource.RLIMIT_NPROC, (nproc, nproc)))

    def apply() -> None:
        join(procs)
        for which, value in pairs:
            resource.setrlimit(which, value)

    return apply


def make_launch(
    iso: Isolation,
    worker: Callable[[str], list[str]],
    scratch: Path,
    spec: SandboxSpec,
    limits: Limits,
    repo_dir: Path,
    cgroup_procs: Iterable[str] = (),
    seccomp_fd: int | None = None,
) -> Launch:
    """Build the Launch for one sandboxed process. `worker(scratch_as_seen)` returns its
    argv; it joins the cgroups whose `cgroup.procs` files are given, and bubblewrap loads
    the seccomp program readable from `seccomp_fd`."""
    drop = iso.uid is not None
    fds = () if seccomp_fd is None else (seccomp_fd,)
    if iso.bubblewrap:
        assert iso.bwrap is not None
        env = worker_env(INNER_SCRATCH, spec, repo_dir)
        argv = bwrap_args(iso.bwrap, scratch, spec, os.geteuid() == 0, seccomp_fd)
        for key, value in env.items():
            argv += ["--setenv", key, value]
        if drop:
            argv += [str(iso.setpriv), f"--reuid={iso.uid}", f"--regid={iso.gid}"]
            argv += ["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
        argv += worker(INNER_SCRATCH)
        nproc = limits.processes if drop else count_user_tasks(os.getuid()) + limits.processes
        preexec = rlimit_preexec(limits, nproc, cgroup_procs)
        return Launch(argv, {}, str(scratch), preexec, pass_fds=fds)
    env = worker_env(str(scratch), spec, repo_dir)
    nproc = limits.processes if drop else count_user_tasks(os.getuid()) + limits.processes
    return Launch(
        worker(str(scratch)),
        env,
        str(scratch),
        rlimit_preexec(limits, nproc, cgroup_procs),
        user=iso.uid,
        group=iso.gid,
    )


def kill_strays(scratch: Path, passes: int = 10) -> int:
    """Without namespaces, kill processes that left the job's process group (setsid, double
    fork) but still carry its environment (HOME=<scratch>). Best effort: a process that
    exec()s with a fresh environment escapes this; bubblewrap's pid namespace does not."""
    marker = f"HOME={scratch}".encode()
    total = 0
    for _ in range(passes):  # strays may fork while we look
        killed = 0
        for entry in glob.glob("/proc/[0-9]*/environ"):
            try:
                if marker in Path(entry).read_bytes().split(b"\0"):
                    os.kill(int(entry.split("/")[2]), signal.SIGKILL)
                    killed += 1
            except (OSError, ValueError):
                continue
        total += killed
        if not killed:
            break
    return total


# EAGAIN from fork or execve: the sandbox uid is at its process limit (a job next door
# fork-bombing under RLIMIT_NPROC). That says nothing about whether a layer works.
BUSY = os.strerror(errno.EAGAIN)


def _probe(
    iso: Isolation, spec: SandboxSpec, limits: Limits, repo_dir: Path, patience_s: float = 20.0
) -> str | None:
    """Run `python -c pass` the way a job would run; None on success, else why not.

    A probe refused with EAGAIN is tried again for up to `patience_s` seconds: giving up at
    once dropped bubblewrap, seccomp and the uid drop in a server started while another
    server's job fork-bombed (a fresh-clone CI run), i.e. a busy uid weakened isolation.
    """
    deadline = time.monotonic() + patience_s
    delay = 0.1
    while True:
        why = _probe_once(iso, spec, limits, repo_dir)
        if why is None or BUSY not in why or time.monotonic() + delay > deadline:
            return why
        time.sleep(delay)
        delay = min(2 * delay, 2.0)


def _probe_once(iso: Isolation, spec: SandboxSpec, limits: Limits, repo_dir: Path) -> str | None:
    job = JobDir(None, iso.uid, iso.gid, limits.scratch_mb if iso.tmpfs else None)
    seccomp_fd = filter_fd(iso.seccomp) if iso.seccomp is not None else None
    try:
        launch = make_launch(
            iso,
            lambda _s: [sys.executable, "-c", "pass"],
            job.phase("front"),
            spec,
            limits,
            repo_dir,
            seccomp_fd=seccomp_fd,
        )
        done = subprocess.run(
            launch.argv,
            check=False,
            env=launch.env,
            cwd=launch.cwd,
            capture_output=True,
            timeout=30,
            preexec_fn=launch.preexec,
            user=launch.user,
            group=launch.group,
            extra_groups=[] if launch.user is not None else None,
            start_new_session=True,
            pass_fds=launch.pass_fds,
        )
        if done.returncode == 0:
            return None
        return done.stderr.decode(errors="replace").strip()[-300:] or f"exit {done.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        job.remove()


def _tmpfs_works(as_root: bool) -> bool:
    """Can this server mount a tmpfs for a job's scratch (root, and the kernel allows it)?"""
    if not as_root:
        return False
    try:
        JobDir(None, None, None, 1).remove()
    except OSError:
        return False
    return True


def probe_isolation(
    preference: str,
    spec: SandboxSpec,
    limits: Limits,
    repo_dir: Path,
    uid: int,
    gid: int,
    cgroups: CgroupSupport | None = None,
) -> Isolation:
    """Pick the strongest isolation that works here ("auto"), or check the one asked for.

    Every layer is tried and kept only if a probe job runs under it; /api/health shows
    what is active and, in `notes`, why anything is missing.
    """
    as_root = os.geteuid() == 0
    groups = cgroups or CgroupSupport(CgroupVersion.NONE)
    notes: list[str] = [groups.note] if groups.note else []
    tmpfs = _tmpfs_works(as_root)
    if not tmpfs:
        notes.append("scratch on disk, walked every second (a tmpfs per job needs root): "
                     "files deleted while open are not counted")
    bwrap = shutil.which("bwrap")
    setpriv = shutil.which("setpriv")
    wants_bwrap = preference in ("auto", IsolationMode.BUBBLEWRAP)
    if wants_bwrap and bwrap:
        drop = as_root and setpriv is not None
        try:
            program: bytes | None = build_filter()
        except OSError as exc:
            program = None
            notes.append(f"no seccomp filter: libseccomp unusable ({exc}; apt-get install "
                         "libseccomp2)")
        iso = Isolation(IsolationMode.BUBBLEWRAP, bwrap, setpriv, uid if drop else None,
                        gid if drop else None, (), groups, program, tmpfs)
        why = _probe(iso, spec, limits, repo_dir)
        if why is not None and program is not None:
            notes.append(f"seccomp filter refused, running without it: {why}")
            iso = Isolation(IsolationMode.BUBBLEWRAP, bwrap, setpriv, iso.uid, iso.gid, (), groups,
                            None,
                            tmpfs)
            why = _probe(iso, spec, limits, repo_dir)
        if why is None:
            if as_root and not drop:
                notes.append("setpriv not found: the worker runs as root, process limit ignored")
            return Isolation(iso.mode, bwrap, setpriv, iso.uid, iso.gid, tuple(notes), groups,
                             iso.seccomp, tmpfs)
        notes.append(f"bubblewrap probe failed: {why}")
    elif wants_bwrap:
        notes.append("bwrap not installed (apt-get install bubblewrap)")
    if preference == IsolationMode.BUBBLEWRAP:
        raise RuntimeError("ISOLATION='bubblewrap' but it does not work here: " + "; ".join(notes))
    notes.append("no seccomp filter without bubblewrap")
    rlimits = IsolationMode.RLIMITS_ONLY
    if as_root:
        dropped = Isolation(rlimits, None, None, uid, gid, (), groups, None, tmpfs)
        if _probe(dropped, spec, limits, repo_dir) is None:
            return Isolation(rlimits, None, None, uid, gid, tuple(notes), groups, None, tmpfs)
        notes.append("the worker runs as root: Python is not readable by the sandbox uid")
    notes.append("no namespaces: the worker can see the host's files and network")
    return Isolation(rlimits, notes=tuple(notes), cgroups=groups, tmpfs=tmpfs)


def make_scratch(root: str | None, iso: Isolation) -> Path:
    """A plain scratch directory (tmp/, shm/, cache/) owned by the worker's uid, for a
    sandboxed process of the server's own (the shared kernel cache's rebuilds); jobs get a
    `kernelscope.server.sandbox.scratch.JobDir`."""
    scratch = Path(tempfile.mkdtemp(prefix="kernelscope-build-", dir=root))
    for sub in ("tmp", "shm", "cache"):
        (scratch / sub).mkdir()
    if iso.uid is not None:
        for path in (scratch, scratch / "tmp", scratch / "shm", scratch / "cache"):
            os.chown(path, iso.uid, iso.gid if iso.gid is not None else -1)
    return scratch


def remove_scratch(scratch: Path) -> None:
    """Delete a scratch tree, never following a link (server/sandbox/scratch.py)."""
    remove_tree(scratch)
