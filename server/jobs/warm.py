"""A warm worker: started in the job's sandbox before any job exists, it imports torch and
the compiler, compiles a built-in snippet once (our code only: this primes Dynamo, the
compiler and g++'s page cache), sets what it holds aside from the garbage collector, then
waits for exactly one job and runs it.

    python server/jobs/warm.py --events-fd N [--warmup] [--import MODULE ...]

In (stdin): one JSON line `{"argv": ["-m", "kernelscope.compiler", "compile", "/scratch/snippet.py",
"--json", ...]}`, the worker command the job would otherwise have been started with (a
`-m MODULE` or a script path, then its arguments). Out: on the event channel (fd N) first
`READY` once warm (the pool reads it), then the job's command runs exactly as
server/jobs/worker_entry.py runs a cold one: its events on fd N, fd 1 left to the snippet.

The process runs one job and exits: a process that ran a snippet is never reused, so
nothing one snippet does can reach a later job through this process. The warm-up runs
before the snippet exists, so it cannot be influenced by one either.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.util
import io
import json
import os
import sys
import tempfile
import traceback

from kernelscope.compiler.devices import CPU, CUDA

READY = b'{"warm": "ready"}\n'

# A module with what most snippets have (a linear layer, a norm, a matrix product, softmax,
# GELU, a reduction): the job's first nn.Module capture, and on a GPU its first cuBLAS
# handle, happen here. A new transformer block's capture took 1.08 s on an H100 after the
# old warm-up (a pointwise function) and 0.52 s for the same snippet again (2026-12-06).
WARMUP_SNIPPET = '''import torch
from torch import nn


class Warm(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.proj = nn.Linear(32, 32)

    def forward(self, x):
        h = self.proj(self.norm(x))
        a = torch.softmax(h @ h.transpose(-2, -1) / 4.0, dim=-1) @ h
        return torch.relu(x * 2 + nn.functional.gelu(a)).sum(dim=-1)


warm = torch.compile(Warm().eval())
with torch.no_grad():
    warm(torch.randn(2, 4, 32))
'''


def warmup_devices() -> list[str]:
    """Where the warm-up compiles: the CPU, and the GPU where there is one (its CUDA
    context, Triton's driver and compiler are then set up before the job, not in it)."""
    import torch

    return [CPU, CUDA] if torch.cuda.is_available() else [CPU]


def warm_up() -> None:
    """Compile a tiny snippet through the whole pipeline on each warm-up device (the
    target table's default backend for it); its events go nowhere."""
    from kernelscope.compiler.options import CompileOptions
    from kernelscope.compiler.pipeline import run_pipeline

    folder = tempfile.mkdtemp(prefix="warmup-")
    path = os.path.join(folder, "warmup.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(WARMUP_SNIPPET)
    for device in warmup_devices():
        options = CompileOptions(device=device)
        with contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            for _event in run_pipeline(WARMUP_SNIPPET, options, path):
                pass
    import torch

    torch._dynamo.reset()  # the job starts with Dynamo's caches empty, as a cold one does
    first_touches()


# Modules a job would otherwise import on first use, in its own time. AOTAutograd's min-cut
# partition (every training graph) imports Inductor's pattern matcher, and with it 167 more
# modules, on its first call: 0.4 s of CPU inside a training step's capture (partition 1.0
# -> 0.6 s of CPU on the 6-block Llama step, docs/perf.md). Imported after the warm-up's
# compile, which made our decomposition table (capture/decompositions.py, once per process)
# before them, as a cold job's capture does; the captured graphs are the same either way.
FIRST_TOUCH_IMPORTS = ("torch._inductor.pattern_matcher",)


def first_touches() -> None:
    for name in FIRST_TOUCH_IMPORTS:
        importlib.import_module(name)


def settle_heap() -> None:
    """Free the warm-up's garbage, then move every object left (torch, the compiler, about
    400,000 of them) out of the collector's sight: a job's full collections then walk only
    what the job made. Before, each of a job's two or three full collections walked the
    whole heap: the 6-block Llama step's front took 3.8-3.9 s of CPU, 2.95-3.3 with this,
    its back half 2.50 s, 2.16 with it (docs/perf/model-compile-latency.md)."""
    gc.collect()
    gc.freeze()


def full_priority() -> None:
    """The pool starts warm workers niced, so warming never slows a running job; the job
    itself runs at normal priority (RLIMIT_NICE lets every thread go back to 0)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = [str(os.getpid())]
    for tid in tasks:
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), 0)
        except (OSError, ValueError):
            pass


def run(events_fd: int, argv: list[str]) -> None:
    """Run the job's command in this process, through worker_entry.py as a cold worker
    does (one rule for where events go)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker_entry.py")
    spec = importlib.util.spec_from_file_location("kernelscope_worker_entry", path)
    assert spec is not None and spec.loader is not None
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    entry.main(["--events-fd", str(events_fd), "--", *argv])


def main() -> int:
    # Run as a script, sys.path[0] is server/: drop it, or `import errors` in a snippet
    # would find server/web/errors.py.
    if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
        del sys.path[0]
    args = _arguments()
    os.set_inheritable(args.events_fd, False)  # nothing the warm-up starts gets it
    for name in args.imports:
        importlib.import_module(name)
    if args.warmup:
        try:
            warm_up()
        except Exception as exc:  # noqa: BLE001 - a failed warm-up only costs speed
            print(f"kernelscope.server.jobs.warm: warm-up failed: {exc!r}", file=sys.stderr)
    settle_heap()
    os.write(args.events_fd, READY)
    line = sys.stdin.buffer.readline()
    if not line:
        return 0  # the pool shut down before giving us a job
    request = json.loads(line)
    # The job sees an empty stdin, as a cold worker does.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    full_priority()
    status = run_status(args.events_fd, [str(a) for a in request["argv"]])
    # The job's output is complete: exit now. Interpreter teardown (torch's atexit hooks,
    # thread pools) takes seconds on a loaded host, and the server waits for the exit.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def _arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="server/jobs/warm.py")
    p.add_argument("--events-fd", type=int, required=True)
    p.add_argument("--import", dest="imports", action="append", default=[])
    p.add_argument("--warmup", action="store_true", help="compile a built-in snippet first")
    return p.parse_args()


def run_status(events_fd: int, argv: list[str]) -> int:
    """run(), and the exit status the job's command asked for (1 for an uncaught
    exception, printed as the interpreter would)."""
    try:
        run(events_fd, argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported like an uncaught exception would be
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
