"""A pool of warm sandboxed workers: the latency half of running a job.

In: the app's `WorkerSettings`. Out: `WarmWorker`s, each a sandboxed
`python -m kernelscope.server.jobs.warm`
process already started in its own scratch directory, with torch and the compiler imported
and a built-in snippet compiled once (server/jobs/warm.py). A job takes one, writes its snippet
into that scratch directory and sends the worker command line on stdin (the worker then
runs it through server/jobs/worker_entry.py, events on their own channel); from then on the
process is supervised exactly like a cold one (server/jobs/worker.py), and it exits after the
job. A process is never given a second job.

The pool keeps `size` workers started (ready or still warming). A background thread starts
a replacement once one is taken, without waiting for the last one to warm up, so after a
burst of jobs every missing worker warms at once (each warm-up is watched by a thread of
its own). While a taken worker's job runs and another worker is ready for the next job, the
replacement waits for the job to end: a warm-up beside it took a third of its CPU on a
2-core host, whatever its nice level (each worker leads a session of its own, and the
kernel's autogroups rank nice levels only inside a session). Warming workers run niced;
the job itself runs at normal priority. When no worker is there (pool empty, size 0, a
command the pool cannot pre-start) the job starts cold.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import resource
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from kernelscope.compiler.codegen import targets
from kernelscope.compiler.devices import CPU
from kernelscope.server.jobs.warm import READY
from kernelscope.server.sandbox.cgroups import JobCgroup
from kernelscope.server.sandbox.launch import INNER_SCRATCH, event_channel, make_launch
from kernelscope.server.sandbox.scratch import JobDir

log = logging.getLogger(__name__)
WARM_SCRIPT = str(Path(__file__).resolve().with_name("warm.py"))
WARM_NICE = 10
# A worker started while another still warms up: it takes what CPU the first leaves, so on
# a small host the first is ready as soon as it would be alone (on 2 cores, two warm-ups at
# one nice level each took 24 s, where one alone took 15).
WARM_NICE_BEHIND = 19
WARM_TIMEOUT_S = 120.0  # a worker that is not warm by then is replaced
MAX_BACKOFF_S = 30.0


def host_has_gpu() -> bool:
    return bool(glob.glob("/dev/nvidia[0-9]*"))


def emulator_env_for(options: dict[str, Any]) -> dict[str, str]:
    """The environment this job's process must start with: its backend's emulator switch
    when the backend runs emulated on the job's device (it must be on before the
    backend's runtime loads), else nothing."""
    return targets.emulator_env(options.get("backend", targets.AUTO),
                                options.get("device", CPU))


@dataclass
class WarmWorker:
    """One pre-started sandboxed worker, not yet given a job."""

    proc: subprocess.Popen[bytes]
    jobdir: JobDir  # the job directory it will run in; it is the job's front half
    group: JobCgroup | None  # the job's cgroups, which it joined when it started
    view: str  # the scratch directory as the worker sees it
    stderr: IO[bytes]
    events_r: int  # the read end of the worker's event channel (server/jobs/worker_entry.py)
    spawned: float = field(default_factory=time.monotonic)
    ready_at: float | None = None
    taken: bool = False
    # The job's back half, warm too (our code only: it never runs a snippet), started in the
    # same job directory with cgroups of its own (same limits); it reads the bundle the
    # server copies in. Its ready line is read by the job (run_phase), not the pool.
    back: WarmWorker | None = None
    owns_dir: bool = True  # a back half leaves the job directory to its front

    def hand(self, argv: list[str]) -> None:
        """Give the worker its job: argv is the command after `python`."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"argv": argv}).encode() + b"\n")
        self.proc.stdin.close()

    def discard(self) -> None:
        if self.back is not None:
            self.back.discard()
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            log.error("warm worker %d did not die", self.proc.pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()
        self.stderr.close()
        try:
            os.close(self.events_r)
        except OSError:
            pass
        if self.group is not None:
            self.group.remove()
        if self.owns_dir:
            self.jobdir.remove()

    def pgids(self) -> list[int]:
        return [self.proc.pid] + ([self.back.proc.pid] if self.back is not None else [])

    @property
    def scratch(self) -> Path:
        return self.jobdir.phase("front")


def pool_prefix(command: tuple[str, ...]) -> tuple[str, list[str]] | None:
    """(python, argv after python) when the worker command is a Python program the pool can
    pre-start (`python -m MODULE ...` or `python SCRIPT ...`), else None."""
    if len(command) < 2 or "python" not in os.path.basename(command[0]):
        return None
    return command[0], list(command[1:])


class WarmPool:
    """Keeps `size` warm workers started; `take()` hands one out or returns None."""

    def __init__(
        self,
        settings: Any,  # server.worker.WorkerSettings (not imported: worker imports us)
        size: int,
        imports: list[str],
        warmup: bool,
        interpret: bool | None = None,
        kcache: Any = None,  # server.kcache.KernelCache: entries linked in at spawn
    ) -> None:
        self.kcache = kcache
        self.settings = settings
        self.size = max(0, size)
        self.imports = list(imports)
        self.warmup = warmup
        # Without a GPU every job that runs an emulated backend (Triton) needs its emulator,
        # and the others do not care, so warm workers start with it on; on a GPU host off.
        self.interpret = (not host_has_gpu()) if interpret is None else interpret
        self.env = targets.emulation_env(CPU) if self.interpret else {}
        self.prefix = pool_prefix(settings.command)
        self.workers: list[WarmWorker] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._backoff = 0.0  # seconds before the next start, after a failed one
        self.spawned = 0
        self.handed = 0
        self.cold = 0
        self._groups: set[int] = set()  # process groups started and not given to a job
        self._running: list[WarmWorker] = []  # taken, front or back half still alive

    # -- public -------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self.size > 0 and self.prefix is not None

    def start(self) -> None:
        with self._cond:
            if not self.enabled or self._thread is not None or self._closed:
                return
            self._thread = threading.Thread(
                target=self._refill_loop, name="kernelscope-warm-pool", daemon=True
            )
            self._thread.start()

    def take(self, options: dict[str, Any]) -> WarmWorker | None:
        """A worker for a job with these options: a ready one first, else one still
        warming (it will be ready sooner than a cold start), else None."""
        needs = emulator_env_for(options)
        if not self.enabled or any(self.env.get(k) != v for k, v in needs.items()):
            with self._cond:
                self.cold += 1
            return None
        self.start()
        with self._cond:
            alive = [w for w in self.workers if w.proc.poll() is None]
            for dead in [w for w in self.workers if w not in alive]:
                self.workers.remove(dead)
                threading.Thread(target=self._discard, args=(dead,), daemon=True).start()
            alive.sort(key=lambda w: (w.ready_at is None, w.spawned))
            if not alive:
                self.cold += 1
                return None
            worker = alive[0]
            for pgid in worker.pgids():
                renice_group(pgid)  # the job runs at normal priority
            worker.taken = True
            self._groups.discard(worker.proc.pid)
            self.workers.remove(worker)
            self._running.append(worker)
            self.handed += 1
            self._cond.notify_all()
            return worker

    def idle_groups(self) -> set[int]:
        """Process groups of workers no job has taken, including ones still starting or being
        discarded (tests that audit the process table leave these out)."""
        with self._cond:
            return set(self._groups)

    def _discard(self, worker: WarmWorker) -> None:
        worker.discard()
        with self._cond:
            self._groups.difference_update(worker.pgids())

    def stats(self) -> dict[str, Any]:
        with self._cond:
            ready = sum(1 for w in self.workers if w.ready_at is not None)
            return {
                "size": self.size if self.enabled else 0,
                "ready": ready,
                "warming": len(self.workers) - ready,
                "handed_out": self.handed,
                "cold_starts": self.cold,
            }

    def wait_ready(self, count: int | None = None, timeout: float = 60.0) -> bool:
        """Block until `count` (default: size) workers are warm (benchmarks, tests)."""
        want = self.size if count is None else count
        self.start()
        end = time.monotonic() + timeout
        with self._cond:
            while sum(1 for w in self.workers if w.ready_at is not None) < want:
                left = end - time.monotonic()
                if left <= 0 or not self.enabled:
                    return False
                self._cond.wait(min(left, 0.2))
        return True

    def shutdown(self) -> None:
        with self._cond:
            self._closed = True
            workers, self.workers = self.workers, []
            self._cond.notify_all()
        for worker in workers:
            self._discard(worker)
        if self._thread is not None:
            self._thread.join(5)

    # -- the refill thread --------------------------------------------------------------
    def _refill_loop(self) -> None:
        while True:
            with self._cond:
                while not self._closed and (len(self.workers) >= self.size
                                            or self._defer_locked()):
                    self._cond.wait(0.2 if self._running else 1.0)
                    self._reap_locked()
                if self._closed:
                    return
                backoff = self._backoff
                behind = any(w.ready_at is None for w in self.workers)
            if backoff:  # the last warm-up failed: do not start them in a tight loop
                time.sleep(backoff)
            try:
                worker = self._spawn(WARM_NICE_BEHIND if behind else WARM_NICE)
            except Exception:
                log.exception("warm pool: could not start a worker")
                self._failed()
                continue
            with self._cond:
                if self._closed:
                    self._discard(worker)
                    return
                self.workers.append(worker)
                self.spawned += 1
            threading.Thread(target=self._watch, args=(worker,), name="kernelscope-warm-up",
                             daemon=True).start()

    def _watch(self, worker: WarmWorker) -> None:
        """Wait for one worker's warm-up (the refill loop has started the next already)."""
        if self._await_ready(worker):
            with self._cond:
                self._backoff = 0.0
        else:
            self._failed()

    def _failed(self) -> None:
        with self._cond:
            self._backoff = min(max(1.0, self._backoff * 2), MAX_BACKOFF_S)

    def _defer_locked(self) -> bool:
        """Whether a replacement waits: while a job runs and another worker is ready for
        the next one. On a small host a warm-up beside the job takes the job's CPU (each
        worker leads a session of its own, so its nice level ranks it only there)."""
        self._running = [w for w in self._running
                         if any(p.poll() is None for p in _procs(w))]
        return bool(self._running) and any(w.ready_at is not None for w in self.workers)

    def _reap_locked(self) -> None:
        for worker in [w for w in self.workers if w.proc.poll() is not None]:
            self.workers.remove(worker)
            threading.Thread(target=self._discard, args=(worker,), daemon=True).start()

    def _await_ready(self, worker: WarmWorker) -> bool:
        """Read the worker's READY line (unless a job took it first). False if it died."""
        fd = worker.events_r
        end = time.monotonic() + WARM_TIMEOUT_S
        while time.monotonic() < end:
            with self._cond:
                if worker.taken or self._closed:
                    return True
                ready, _, _ = select.select([fd], [], [], 0)
                if ready:
                    got = os.read(fd, len(READY))
                    if got == READY:
                        worker.ready_at = time.monotonic()
                        self._cond.notify_all()
                        return True
                    # EOF or garbage: the warm-up died; say why and replace it.
                    self.workers.remove(worker)
                    break
            time.sleep(0.05)
        else:
            with self._cond:
                if worker in self.workers:
                    self.workers.remove(worker)
        worker.stderr.seek(0)
        tail = worker.stderr.read()[-2000:].decode(errors="replace")
        log.warning("warm pool: worker %d did not warm up: %s", worker.proc.pid, tail)
        self._discard(worker)
        return False

    def _spawn(self, nice: int = WARM_NICE) -> WarmWorker:
        s = self.settings
        iso = s.isolation
        # The job's own directory and cgroups, made now: the warm worker is its front half,
        # under the same limits as a cold one (memory and pids cgroups, tmpfs, seccomp).
        jobdir = JobDir(s.scratch_root, iso.uid, iso.gid,
                        s.limits.scratch_mb if iso.tmpfs else None)
        group: JobCgroup | None = None
        front: WarmWorker | None = None
        try:
            if iso.cgroups.present:
                group = JobCgroup(iso.cgroups, jobdir.path.name, s.limits.memory_mb,
                                  s.limits.processes, s.limits.tcp_mb)
            if self.kcache is not None:
                self.kcache.link_into(jobdir.phase("front"))  # the warm-up finds its kernel
            front = self._start(jobdir, "front", group, nice)
            if getattr(s, "back_command", None) is not None:
                # A cgroup of its own: the front's is killed when the front ends, and the
                # back half waits through that.
                back_group = None
                if iso.cgroups.present:
                    back_group = JobCgroup(iso.cgroups, jobdir.path.name + "-back",
                                           s.limits.memory_mb, s.limits.processes,
                                           s.limits.tcp_mb)
                front.back = self._start(jobdir, "back", back_group, nice)
                front.back.owns_dir = False
        except BaseException:
            if front is not None:
                front.discard()
            else:
                if group is not None:
                    group.remove()
                jobdir.remove()
            raise
        return front

    def _start(self, jobdir: JobDir, phase: str, group: JobCgroup | None,
               nice: int = WARM_NICE) -> WarmWorker:
        """One warm process in `phase` of the job directory (front, or back half)."""
        assert self.prefix is not None
        python, _rest = self.prefix
        s = self.settings
        iso = s.isolation
        scratch = jobdir.phase(phase)
        with event_channel(iso) as (events_r, events_w, seccomp_fd):
            # Run as a script, not `-m kernelscope.server.jobs.warm`: that would import the server
            # package
            # (Flask and all) into every worker.
            argv = [python, WARM_SCRIPT, "--events-fd", str(events_w)]
            for name in self.imports:
                argv += ["--import", name]
            if self.warmup:
                argv.append("--warmup")
            spec = s.spec
            if self.env:
                spec = replace(spec, env={**self.env, **spec.env})
            launch = make_launch(iso, lambda _view: argv, scratch, spec, s.limits, s.repo_dir,
                                 group.procs if group is not None else [], seccomp_fd)
            view = INNER_SCRATCH if iso.bubblewrap else str(scratch)
            stderr = tempfile.TemporaryFile()
            proc = launch.start(subprocess.PIPE, stderr, events_w,
                                _niced(launch.preexec, os.geteuid() == 0, nice))
            with self._cond:
                self._groups.add(proc.pid)
        return WarmWorker(proc, jobdir, group, view, stderr, events_r)


def _procs(worker: WarmWorker) -> list[subprocess.Popen[bytes]]:
    return [worker.proc] + ([worker.back.proc] if worker.back is not None else [])


def renice_group(pgid: int) -> None:
    """Put every thread of a worker's process group back to nice 0 (needs root; without it
    the worker does this itself once it reads its job)."""
    if os.geteuid() != 0:
        return
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != pgid:  # fields after "(comm)": state, ppid, pgrp
                continue
            for task in os.listdir(os.path.dirname(stat) + "/task"):
                os.setpriority(os.PRIO_PROCESS, int(task), 0)
        except (OSError, ValueError, IndexError):
            continue


def _niced(preexec: Callable[[], None], host_renices: bool, nice: int = WARM_NICE
           ) -> Callable[[], None]:
    """Run the sandbox's preexec, then nice the worker, but only where it can get back to
    nice 0 for its job: the server (as root) renices it, or RLIMIT_NICE lets it do so."""

    def apply() -> None:
        preexec()
        try:
            resource.setrlimit(resource.RLIMIT_NICE, (20, 20))
            can_return = True
        except (OSError, ValueError):
            can_return = host_renices
        if can_return:
            os.nice(nice)

    return apply
