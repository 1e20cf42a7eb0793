"""Scratch directories: where one job's halves read and write, and how they go away.

In: the scratch root (`SCRATCH_ROOT`), the worker uid, the scratch budget. Out: a job
directory with one subtree per sandboxed process (`front/`: the snippet, its bundle, its
tmp and caches; `back/`: the bundle copy our own code compiles, with a cache the snippet
never touched), its removal, and the start-up sweep of directories a killed server left.

When the server runs as root, the job directory is a tmpfs mount of exactly the scratch
budget: every byte a job writes counts, files deleted while still open included (they
were invisible to a directory walk: 3 GiB held against a 1 GiB budget), the pages are
charged to the job's memory cgroup, and unmounting frees all of it at once. Otherwise the
budget is a walk of the tree every second (server/jobs/worker.py), as before.

Removal never follows a symbolic link: directories are opened with O_NOFOLLOW relative to
their parent's descriptor, and permissions are repaired through those descriptors, so a
snippet that plants a link cannot make the server chmod or delete anything outside.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import hashlib
import logging
import os
import secrets
import stat
import tempfile
from pathlib import Path

PREFIX = "kernelscope-job-"


def root_prefix(root: Path) -> str:
    """The name prefix of the job directories (and so the cgroups) made under `root`: two
    servers on one host share the cgroup parent but not their scratch roots, and a sweep
    must see only its own root's groups (another's, without a process for the moment
    between its making and its worker's join, looked dead and went)."""
    tag = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:8]
    return f"{PREFIX}{tag}-"
LOCK = ".lock"  # beside each job directory: its lock file
PHASES = ("front", "back")
SUBDIRS = ("tmp", "shm", "cache")
MNT_DETACH = 2
MS_NOSUID, MS_NODEV = 2, 4
log = logging.getLogger(__name__)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def mount_tmpfs(path: Path, size_mb: int) -> None:
    """Mount a tmpfs of `size_mb` on `path` (root only); OSError if the kernel says no."""
    options = f"size={size_mb}m,mode=0755,nr_inodes=65536".encode()
    flags = MS_NOSUID | MS_NODEV
    if _libc().mount(b"tmpfs", str(path).encode(), b"tmpfs", flags, options) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount tmpfs on {path}: {os.strerror(code)}")


def unmount(path: Path) -> None:
    if _libc().umount2(str(path).encode(), MNT_DETACH) != 0:
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOENT):  # EINVAL: not a mount point
            log.warning("umount %s: %s", path, os.strerror(code))


def is_mount(path: Path) -> bool:
    try:
        return os.path.ismount(path)
    except OSError:
        return False


class JobDir:
    """One job's scratch: `front/` and `back/`, each with tmp/, shm/ and cache/."""

    def __init__(self, root: str | None, uid: int | None, gid: int | None, tmpfs_mb: int | None):
        # Its lock first: held (flock-ed) while the job runs, in a file beside the directory
        # made before the directory is, so a sweep never sees a live job's directory
        # unlocked, however young (server/runtime.py sweeps at every start).
        self.path, self._lock = _locked_name(Path(root or tempfile.gettempdir()))
        self.mounted = False
        try:
            if tmpfs_mb is not None:
                mount_tmpfs(self.path, tmpfs_mb)
                self.mounted = True
        except OSError:
            os.rmdir(self.path)
            _unlock(self.path, self._lock)
            raise
        for phase in PHASES:
            for sub in ("", *SUBDIRS):
                d = self.path / phase / sub
                d.mkdir(exist_ok=True)
                if uid is not None:
                    os.chown(d, uid, gid if gid is not None else -1)

    def phase(self, name: str) -> Path:
        return self.path / name

    def remove(self) -> None:
        if self.mounted:
            unmount(self.path)
        remove_tree(self.path)
        _unlock(self.path, self._lock)


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + LOCK)


def _locked_name(root: Path) -> tuple[Path, int]:
    """A new job directory under `root`, and its lock file's descriptor, locked."""
    while True:
        path = root / (root_prefix(root) + secrets.token_hex(6))
        try:
            fd = os.open(lock_path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o600)
        except FileExistsError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            _unlock(path, fd)
            continue
        return path, fd


def _unlock(path: Path, fd: int) -> None:
    try:
        os.unlink(lock_path(path))
    except OSError:
        pass
    os.close(fd)


def remove_tree(path: Path) -> None:
    """Delete `path` and everything under it without following any symbolic link."""
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _remove_entry(parent, path.name)
    finally:
        os.close(parent)


def _remove_entry(dir_fd: int, name: str) -> None:
    stack: list[tuple[int, str, bool]] = [(dir_fd, name, False)]
    opened: list[int] = []
    try:
        while stack:
            parent, entry, emptied = stack.pop()
            try:
                st = os.lstat(entry, dir_fd=parent)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                _ignore(lambda: os.unlink(entry, dir_fd=parent))
                continue
            if emptied:
                _ignore(lambda: os.rmdir(entry, dir_fd=parent))
                continue
            fd = _open_dir(parent, entry)
            if fd is None:
                continue
            opened.append(fd)
            stack.append((parent, entry, True))
            stack.extend((fd, child, False) for child in os.listdir(fd))
    finally:
        for fd in opened:
            os.close(fd)


def _open_dir(parent: int, name: str) -> int | None:
    """Open a directory (never a link) for listing and emptying, repairing its permissions
    when the snippet took them away: through an O_PATH descriptor of that very directory,
    so no link can be in the way."""
    try:
        path_fd = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
    except OSError:
        return None
    try:
        proc = f"/proc/self/fd/{path_fd}"
        if os.stat(proc).st_mode & 0o700 != 0o700:
            _ignore(lambda: os.chmod(proc, 0o700))
        return os.open(proc, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    finally:
        os.close(path_fd)


def _ignore(action: object) -> None:
    try:
        action()  # type: ignore[operator]
    except OSError:
        pass


def sweep(root: str | None) -> int:
    """Remove job directories left by a server that died (kill -9); returns how many.

    A directory is stale when nobody holds its lock, whatever its age: a live job's lock
    file is made and locked before its directory (JobDir). A directory without a lock file
    is a dead job's (or one made before lock files, which locked the directory itself).
    """
    base = Path(root or tempfile.gettempdir())
    removed = 0
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return 0
    for path in candidates:
        if path.name.endswith(LOCK):
            if not path.with_name(path.name.removesuffix(LOCK)).exists():
                _remove_free_lock(path)
            continue
        removed += _sweep_one(path)
    return removed


def _sweep_one(path: Path) -> int:
    try:
        if not stat.S_ISDIR(path.lstat().st_mode):
            return 0
        target = lock_path(path) if lock_path(path).exists() else path
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return 0  # a live server's job
    try:
        if is_mount(path):
            unmount(path)
        remove_tree(path)
        if target != path:
            os.unlink(target)
        return 1
    except OSError:
        return 0
    finally:
        os.close(fd)


def _remove_free_lock(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)
