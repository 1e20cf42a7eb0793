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

import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    trace_mb: int = 8  # all of a job's events together, as stored

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
        )


@dataclass(frozen=True)
class Isolation:
    """Which isolation the host allows, decided once when the app starts."""

    mode: str  # "bubblewrap" or "rlimits-only"
    bwrap: str | None = None
    setpriv: str | None = None
    uid: int | None = None  # drop to this uid/gid (only when the server runs as root)
    gid: int | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        user = "unchanged" if self.uid is None else f"uid {self.uid}"
        return {"mode": self.mode, "worker_user": user, "notes": list(self.notes)}


@dataclass(frozen=True)
class Launch:
    """Everything subprocess.Popen needs to start one sandboxed worker."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    preexec: Callable[[], None]
    user: int | None = None
    group: int | None = None


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


def bwrap_args(bwrap: str, scratch: Path, spec: SandboxSpec, as_root: bool) -> list[str]:
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
    made: set[str] = set()
    for path in _minimal(spec.readonly):
        for anc in _ancestors(path):
            if anc not in made:
                args += ["--perms", "0755", "--dir", anc]
                made.add(anc)
        args += ["--ro-bind", os.path.realpath(path), path]
    for hidden in spec.hidden:
        inside = any(_under(hidden, p) for p in spec.readonly)
        if inside and not any(_under(p, hidden) for p in spec.readonly):
            args += ["--tmpfs", hidden]
    for masked in spec.masked:
        if os.path.exists(masked) and any(_under(masked, p) for p in spec.readonly):
            args += ["--ro-bind", "/dev/null", masked]
    for node in sorted(glob.glob("/dev/nvidia*")):
        args += ["--dev-bind", node, node]
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
    args += ["--unshare-cgroup-try", "--die-with-parent", "--chdir", INNER_SCRATCH, "--clearenv"]
    if not as_root:
        args += ["--unshare-user", "--disable-userns", "--cap-drop", "ALL"]
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
        "OMP_WAIT_POLICY": "PASSIVE",
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


def rlimit_preexec(limits: Limits, nproc: int) -> Callable[[], None]:
    """The function run in the child between fork and exec: only setrlimit calls."""
    pairs = [
        (resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5)),
        (resource.RLIMIT_DATA, (limits.memory_mb * MiB, limits.memory_mb * MiB)),
        (resource.RLIMIT_FSIZE, (limits.file_mb * MiB, limits.file_mb * MiB)),
        (resource.RLIMIT_NPROC, (nproc, nproc)),
        (resource.RLIMIT_CORE, (0, 0)),
    ]

    def apply() -> None:
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
) -> Launch:
    """Build the Launch for one job. `worker(scratch_as_seen)` returns the worker argv."""
    drop = iso.uid is not None
    if iso.mode == "bubblewrap":
        assert iso.bwrap is not None
        env = worker_env(INNER_SCRATCH, spec, repo_dir)
        argv = bwrap_args(iso.bwrap, scratch, spec, as_root=os.geteuid() == 0)
        for key, value in env.items():
            argv += ["--setenv", key, value]
        if drop:
            argv += [str(iso.setpriv), f"--reuid={iso.uid}", f"--regid={iso.gid}"]
            argv += ["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
        argv += worker(INNER_SCRATCH)
        nproc = limits.processes if drop else count_user_tasks(os.getuid()) + limits.processes
        return Launch(argv, {}, str(scratch), rlimit_preexec(limits, nproc))
    env = worker_env(str(scratch), spec, repo_dir)
    nproc = limits.processes if drop else count_user_tasks(os.getuid()) + limits.processes
    return Launch(
        worker(str(scratch)),
        env,
        str(scratch),
        rlimit_preexec(limits, nproc),
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


def make_scratch(root: str | None, iso: Isolation) -> Path:
    """A fresh scratch directory (with tmp/, shm/, cache/) owned by the worker's uid."""
    scratch = Path(tempfile.mkdtemp(prefix="kernelscope-job-", dir=root))
    for sub in ("tmp", "shm", "cache"):
        (scratch / sub).mkdir()
    if iso.uid is not None:
        for path in (scratch, scratch / "tmp", scratch / "shm", scratch / "cache"):
            os.chown(path, iso.uid, iso.gid if iso.gid is not None else -1)
    return scratch


def remove_scratch(scratch: Path) -> None:
    """Delete a scratch tree even if the snippet chmod-ed parts of it away."""

    def fix(func: Callable[..., Any], path: str, _exc: Any) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass

    shutil.rmtree(scratch, onerror=fix)


def _probe(iso: Isolation, spec: SandboxSpec, limits: Limits, repo_dir: Path) -> str | None:
    """Run `python -c pass` the way a job would run; None on success, else why not."""
    scratch = make_scratch(None, iso)
    try:
        launch = make_launch(
            iso, lambda _s: [sys.executable, "-c", "pass"], scratch, spec, limits, repo_dir
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
        )
        if done.returncode == 0:
            return None
        return done.stderr.decode(errors="replace").strip()[-300:] or f"exit {done.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        remove_scratch(scratch)


def probe_isolation(
    preference: str, spec: SandboxSpec, limits: Limits, repo_dir: Path, uid: int, gid: int
) -> Isolation:
    """Pick the strongest isolation that works here ("auto"), or check the one asked for."""
    as_root = os.geteuid() == 0
    notes: list[str] = []
    bwrap = shutil.which("bwrap")
    setpriv = shutil.which("setpriv")
    if preference in ("auto", "bubblewrap") and bwrap:
        drop = as_root and setpriv is not None
        iso = Isolation("bubblewrap", bwrap, setpriv, uid if drop else None, gid if drop else None)
        why = _probe(iso, spec, limits, repo_dir)
        if why is None:
            if as_root and not drop:
                notes.append("setpriv not found: the worker runs as root, process limit ignored")
            return Isolation(iso.mode, bwrap, setpriv, iso.uid, iso.gid, tuple(notes))
        notes.append(f"bubblewrap probe failed: {why}")
    elif preference in ("auto", "bubblewrap"):
        notes.append("bwrap not installed (apt-get install bubblewrap)")
    if preference == "bubblewrap":
        raise RuntimeError("ISOLATION='bubblewrap' but it does not work here: " + "; ".join(notes))
    if as_root:
        dropped = Isolation("rlimits-only", None, None, uid, gid)
        if _probe(dropped, spec, limits, repo_dir) is None:
            return Isolation("rlimits-only", None, None, uid, gid, tuple(notes))
        notes.append("the worker runs as root: Python is not readable by the sandbox uid")
    notes.append("no namespaces: the worker can see the host's files and network")
    return Isolation("rlimits-only", notes=tuple(notes))
