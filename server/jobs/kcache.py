"""The kernel cache shared across jobs, written only by trusted code.

In: a job's scratch directory, before the job (to show it the shared entries) and after it
(to take its new entries in). Out: a cache directory of built C++ libraries
(`kernels_<key>.so`), generated wrapper modules (`graph_<key>.py`) and, per Triton wrapper,
Triton's compiled kernels (`triton_<key>/`, built by server/jobs/tcache.py) that every later job
finds by the same content-derived names the compiler uses (compiler/runtime/cache.py), so a
kernel compiled once is never built again.

A snippet runs in the same process as the compiler, so nothing a job wrote can be trusted.
The rules that keep one snippet from planting code that another job loads:

- Jobs never write here. Before a job starts, the server puts into the job's own cache
  folder symlinks to the shared entries; the shared folder is read-only to the job
  (bubblewrap binds it read-only; without bubblewrap its files are the server's and the
  job runs as another uid; where neither holds, sharing is off and /api/health says so).
- After a job, the server reads the job's cache folder as data. A wrapper is taken only if
  its content hashes to the key in its name (so a later job that generates the same
  wrapper gets exactly those bytes). A library is never taken: the server takes the C++
  source, checks it hashes to its name, and builds the library itself with g++ in a fresh
  sandbox that no snippet ran in. Symlinks, oversized files and other names are ignored.
- Results our own code computed (compiler/runtime/results.py: a GEMM choice's measured
  times, a kernel's build report) cannot be verified by their content, so they are taken
  only from the back half's folder (`promote(..., results=True)`: the process of our own
  code that never ran a snippet) and only under bubblewrap (`results_shared`), where the
  front half cannot reach that folder; a snippet's own cache, or a one-process job's, is
  never read for them. They must parse as their kind's shape; later jobs see them linked
  into `results/` of their cache folder.
- Entries are written atomically (temporary name, then rename) with mode 0644.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import re
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.runtime import results as kept

Runner = Callable[[Callable[[str], list[str]], float], bool]

log = logging.getLogger(__name__)
KEY = r"[0-9a-f]{20}"
SOURCE_NAME = re.compile(rf"^kernels_({KEY})\.cpp$")
WRAPPER_NAME = re.compile(rf"^graph_({KEY})\.py$")
INPUTS_NAME = re.compile(rf"^graph_({KEY})\.inputs\.json$")
SHARED_NAME = re.compile(rf"^(kernels_{KEY}\.so|graph_{KEY}\.py|triton_{KEY})$")
MAX_PREBUILDS = 4  # Triton wrappers built from one job
MAX_FILE_BYTES = 4 << 20
MAX_PER_JOB = 32  # new entries taken from one job
MAX_LINKS = 4096  # newest entries shown to a job
MAX_ENTRIES = 20000  # the cache keeps this many (and as many results), dropping the oldest
WRAPPER_BACKENDS = tuple(targets.names())
BUILD_TIMEOUT_S = 120


def versions_key() -> str:
    """kernelscope.compiler.runtime.cache.versions_key() without importing torch (a test checks they
    agree; if they ever differ, nothing verifies and nothing is shared, which is safe)."""
    torch, triton = _version("torch", "version.py"), _version("triton", "__init__.py")
    return f"torch={torch};triton={triton};py={platform.python_version()}"


def _version(package: str, module: str) -> str:
    """The package's `__version__` as its own source spells it (what the compiler reads),
    found without importing it. A distribution's metadata can say otherwise (a local
    version tag, "3.6.0+git..."), and then no key would match (docs/perf.md, "Notes behind
    other comments")."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return "none"
    try:
        text = (Path(spec.origin).parent / module).read_text()
    except OSError:
        text = ""
    if m := re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M):
        return m.group(1)
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def content_key(versions: str, *parts: str) -> str:
    """kernelscope.compiler.runtime.cache.content_key, with the versions passed in."""
    h = hashlib.sha256()
    for p in (*parts, versions):
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


@dataclass
class Promotion:
    wrappers: int = 0
    libraries: int = 0
    triton: int = 0  # wrappers whose Triton kernels the server built and shared
    results: int = 0  # measured times and kernel reports of the back half
    rejected: int = 0


class KernelCache:
    """The shared folder plus the two trusted steps around each job."""

    def __init__(self, root: str | os.PathLike[str], settings: Any) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        self.settings = settings  # server.worker.WorkerSettings: the build sandbox
        self.versions = versions_key()
        self.results = self.root / kept.FOLDER
        self.results.mkdir(exist_ok=True)
        os.chmod(self.results, 0o755)
        # Only bubblewrap keeps a job's front half out of its back half's folder.
        self.results_shared = settings.isolation.bubblewrap
        self._lock = threading.Lock()
        self.stats = {"linked": 0, "wrappers": 0, "libraries": 0, "triton": 0, "results": 0,
                      "rejected": 0}

    # -- before the job ------------------------------------------------------------------
    def link_into(self, scratch: Path) -> int:
        """Symlink the newest shared entries into the job's cache folder; returns how many.
        Names already there are left alone (the job made them, or they are linked)."""
        folder = job_cache(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        uid = self.settings.isolation.uid
        if uid is not None:
            os.chown(folder.parent, uid, -1)
            os.chown(folder, uid, -1)
        entries = []
        with os.scandir(self.root) as it:
            for entry in it:
                kind_ok = (entry.is_dir(follow_symlinks=False) if entry.name.startswith("triton_")
                           else entry.is_file(follow_symlinks=False))
                if SHARED_NAME.match(entry.name) and kind_ok:
                    entries.append((entry.stat(follow_symlinks=False).st_mtime, entry.name))
        entries.sort(reverse=True)
        made = _link(self.root, [name for _mtime, name in entries[:MAX_LINKS]], folder)
        if self.results_shared:
            into = folder / kept.FOLDER
            into.mkdir(exist_ok=True)
            if uid is not None:
                os.chown(into, uid, -1)
            made += _link(self.results, _newest(self.results, kept.NAME, MAX_LINKS), into)
        with self._lock:
            self.stats["linked"] += made
        return made

    # -- after the job -------------------------------------------------------------------
    def promote(self, scratch: Path, results: bool = False) -> Promotion:
        """Take a finished job's new wrappers (verified) and libraries (rebuilt here), and
        with `results` (the caller knows `scratch` is the back half's) its results."""
        result = Promotion()
        folder = job_cache(scratch)
        if not folder.is_dir() or folder.is_symlink():
            return result
        if results and self.results_shared:
            self._take_results(folder / kept.FOLDER, result)
        taken = self._take_built(folder, result)
        result.triton = self._prebuild_triton(folder)
        with self._lock:
            for key in ("wrappers", "libraries", "triton", "results", "rejected"):
                self.stats[key] += getattr(result, key)
        if taken or result.triton:
            self._prune()
        if result.results:
            _prune(self.results, kept.NAME)
        return result

    def _take_built(self, folder: Path, result: Promotion) -> int:
        """The job's new wrappers and C++ sources, by name order, at most MAX_PER_JOB of
        them taken; returns how many were."""
        taken = 0
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if taken >= MAX_PER_JOB:
                break
            wrapper, source = WRAPPER_NAME.match(entry.name), SOURCE_NAME.match(entry.name)
            if not (wrapper or source) or not entry.is_file(follow_symlinks=False):
                continue
            name = entry.name if wrapper else entry.name[: -len(".cpp")] + ".so"
            target = self.root / name
            if not target.exists() and self._take_one(Path(entry.path), wrapper, source,
                                                      target, result):
                taken += 1
        return taken

    def _take_one(self, path: Path, wrapper: re.Match[str] | None,
                  source: re.Match[str] | None, target: Path, result: Promotion) -> bool:
        """A wrapper whose content is its name, installed; a source whose content is its
        name, built here: True. Anything else counts as rejected."""
        text = _read_small(path)
        if text is not None and wrapper and self._wrapper_ok(text, wrapper[1]):
            _install(target, text.encode())
            result.wrappers += 1
            return True
        if (text is not None and source and content_key(self.versions, text) == source[1]
                and self._build(text, target)):
            result.libraries += 1
            return True
        result.rejected += 1
        return False

    def _take_results(self, folder: Path, result: Promotion) -> None:
        """The back half's new results (regular files of a result's name and shape)."""
        if folder.is_symlink() or not folder.is_dir():
            return
        for entry in sorted(os.scandir(folder), key=lambda e: e.name)[:MAX_LINKS]:
            m = kept.NAME.match(entry.name)
            if not m or not entry.is_file(follow_symlinks=False):
                continue  # a link is an entry this cache showed the job
            target = self.results / entry.name
            if target.exists() or result.results >= MAX_PER_JOB:
                continue
            text = _read_small(Path(entry.path))
            try:
                data = json.loads(text) if text is not None else None
            except ValueError:
                data = None
            if data is None or not kept.valid(m[1], data):
                result.rejected += 1
                continue
            _install(target, text.encode() if text is not None else b"")
            result.results += 1

    def _prebuild_triton(self, folder: Path) -> int:
        """For each Triton wrapper of the job that the cache holds (verified) and that ran
        on a GPU, the server's own build of its kernels (server/jobs/tcache.py). The job's specs
        of the wrapper's inputs are data; nothing Triton wrote in the job is read."""
        from kernelscope.server.jobs.tcache import prebuild

        made = 0
        for entry in sorted(os.scandir(folder), key=lambda e: e.name)[:4096]:
            m = INPUTS_NAME.match(entry.name)
            if made >= MAX_PREBUILDS or not m or not entry.is_file(follow_symlinks=False):
                continue
            key = m[1]
            wrapper = _read_small(self.root / f"graph_{key}.py")
            inputs = _read_small(Path(entry.path))
            if wrapper is None or inputs is None or (self.root / f"triton_{key}").exists():
                continue
            if content_key(self.versions, wrapper, "triton") == key:
                made += 1 if prebuild(self, key, wrapper, inputs) else 0
        return made

    def _wrapper_ok(self, text: str, key: str) -> bool:
        return any(content_key(self.versions, text, b) == key for b in WRAPPER_BACKENDS)

    def _build(self, source: str, target: Path) -> bool:
        """g++ on verified source in a fresh sandbox (no snippet ever ran in it)."""
        cxx, flags = compiler_flags(self.settings.repo_dir)
        with self.sandboxed({"kernels.cpp": source}) as (scratch, run):
            argv = lambda v: [shutil.which(cxx) or cxx, *flags, f"{v}/kernels.cpp",  # noqa: E731
                              "-o", f"{v}/kernels.so"]
            built = scratch / "kernels.so"
            if not run(argv, BUILD_TIMEOUT_S) or built.is_symlink() or not built.is_file():
                return False
            _install(target, built.read_bytes())
            return True
        return False

    @contextmanager
    def sandboxed(self, files: dict[str, str]) -> Iterator[tuple[Path, Runner]]:
        """A fresh scratch (no snippet ever ran in it) holding `files`, and a function that
        runs `argv(scratch as the process sees it)` sandboxed there and says whether it
        succeeded. The scratch is removed after the block."""
        from kernelscope.server.sandbox.launch import make_scratch, remove_scratch

        scratch = make_scratch(self.settings.scratch_root, self.settings.isolation)
        ready = self._place(scratch, files)

        def run(argv: Callable[[str], list[str]], timeout: float) -> bool:
            return ready and _run_sandboxed(self.settings, scratch, argv, timeout)

        try:
            yield scratch, run
        except OSError as exc:  # reading what the sandbox made
            log.warning("kernel cache: rebuild failed: %s", exc)
        finally:
            remove_scratch(scratch)

    def _place(self, scratch: Path, files: dict[str, str]) -> bool:
        """`files` written into the scratch, owned by the sandbox's uid; False if they
        could not be."""
        iso = self.settings.isolation
        try:
            for name, text in files.items():
                path = scratch / name
                path.write_text(text, encoding="utf-8")
                if iso.uid is not None:
                    os.chown(path, iso.uid, iso.gid if iso.gid is not None else -1)
        except OSError as exc:
            log.warning("kernel cache: rebuild failed: %s", exc)
            return False
        return True

    def _prune(self) -> None:
        _prune(self.root, SHARED_NAME)

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"dir": str(self.root), **self.stats}


def _newest(folder: Path, name: re.Pattern[str], count: int) -> list[str]:
    entries = sorted(((e.stat(follow_symlinks=False).st_mtime, e.name)
                      for e in os.scandir(folder) if name.match(e.name)), reverse=True)
    return [n for _mtime, n in entries[:count]]


def _link(source: Path, names: list[str], into: Path) -> int:
    """Symlink `source/name` as `into/name` for each name not there yet; how many."""
    made = 0
    for name in names:
        try:
            os.symlink(source / name, into / name)
            made += 1
        except FileExistsError:
            continue
    return made


def _prune(folder: Path, name: re.Pattern[str]) -> None:
    """Drop the oldest entries of `folder` beyond MAX_ENTRIES."""
    entries = sorted((e.stat(follow_symlinks=False).st_mtime, e.path)
                     for e in os.scandir(folder) if name.match(e.name))
    for _mtime, path in entries[: max(0, len(entries) - MAX_ENTRIES)]:
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            pass


def compiler_flags(repo_dir: Path) -> tuple[str, list[str]]:
    """The C++ backend's compiler and flags (compiler/codegen/cpp/kernel.py's CXX and FLAGS), read
    from its source, because importing it would import torch into the server."""
    import ast

    source = (Path(repo_dir) / "compiler" / "codegen" / "cpp" / "kernel.py").read_text()
    # The names FLAGS may use, found as the compiler finds them (without importing torch).
    names = {"TORCH_INCLUDE_DIR": _torch_include_dir()}
    flags: list[str] | None = None
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
            "FLAGS"
        ] and isinstance(node.value, ast.List):
            flags = [names[e.id] if isinstance(e, ast.Name) else str(ast.literal_eval(e))
                     for e in node.value.elts]
    if flags is None:
        raise RuntimeError("compiler/codegen/cpp/kernel.py defines no FLAGS")
    return os.environ.get("CXX", "g++"), flags


def _torch_include_dir() -> str:
    """compiler/codegen/mathops.py's TORCH_INCLUDE_DIR: torch's package folder + include."""
    spec = importlib.util.find_spec("torch")
    origin = spec.origin if spec is not None and spec.origin else ""
    return os.path.join(os.path.dirname(origin), "include")


def shared_kernel_cache(root: str | None, settings: Any) -> KernelCache | None:
    """The cache, or None where it is off or a job could write into it: without bubblewrap
    a worker that runs as the server's own uid could (read-only needs another uid)."""
    if not root:
        return None
    iso = settings.isolation
    if not iso.bubblewrap and iso.uid is None:
        return None
    return KernelCache(root, settings)


def job_cache(scratch: Path) -> Path:
    """Where a job's compiler caches (KERNELSCOPE_CACHE in server/sandbox/launch.py)."""
    return scratch / "cache" / "kernelscope"


def _run_sandboxed(settings: Any, scratch: Path, argv: Callable[[str], list[str]],
                   timeout: float) -> bool:
    """`argv(scratch as the process sees it)` run sandboxed in `scratch`: did it succeed?"""
    from kernelscope.server.sandbox.launch import INNER_SCRATCH, make_launch

    iso = settings.isolation
    command = argv(INNER_SCRATCH if iso.bubblewrap else str(scratch))
    launch = make_launch(iso, lambda _v: command, scratch, settings.spec, settings.limits,
                         settings.repo_dir)
    try:
        done = subprocess.run(
            launch.argv,
            env=launch.env or None,
            cwd=launch.cwd,
            preexec_fn=launch.preexec,  # noqa: PLW1509 - setrlimit only
            user=launch.user,
            group=launch.group,
            extra_groups=[] if launch.user is not None else None,
            start_new_session=True,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("kernel cache: rebuild failed: %s", exc)
        return False
    if done.returncode != 0:
        log.info("kernel cache: rebuild failed: %s", done.stderr[-500:])
    return done.returncode == 0


def _read_small(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _install(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{time.monotonic_ns()}")
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, target)
