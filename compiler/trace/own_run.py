"""`kernelscope run script.py [args]`: the user's own script, every torch.compile recorded.

In: a script (or `-m module`) and its arguments. Out: a trace directory (compiler/
trace_dir.py) with one file per compiled graph and `run.json` (the command, the exit status
and every torch.compile call the script made: where, which backend, mode, fullgraph,
dynamic), and the script's own exit status. One rank of a multi-process run (torchrun,
`kernelscope run --nproc`: compiler/trace/launch.py) writes into `rank<R>/` of the
directory (compiler/trace/ranks.py).

The script runs in this process as `python script.py` runs it (`__main__`, `sys.argv`,
`sys.path[0]` its folder). For the run, `torch.compile` is wrapped (restored afterwards):
- a call with `backend="kernelscope"` compiles as it asked, its graphs recorded into the
  directory (a `trace_dir` the call names itself wins) and each file names the call;
- a call with another backend (Inductor, the default, included) runs unchanged and is not
  recorded; run.json lists it and the summary says so. `--all-backends` routes it to
  Kernelscope instead (its `mode` and `options`, which are the other backend's, are
  dropped and listed).
`KERNELSCOPE_TRACE_DIR` is set too, so a backend the script reaches some other way (a
`torch._dynamo.optimize("kernelscope")`, a child process) records into the same place.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelscope.compiler.options import TRACE_DIR_ENV
from kernelscope.compiler.trace.ranks import process_rank, rank_dir
from kernelscope.compiler.trace.reader import RUN_FILE, RUN_FORMAT, VERSION
from kernelscope.compiler.versions import __version__

OURS = "kernelscope"


@dataclass
class Call:
    """One torch.compile call of the script."""

    call: int
    site: dict[str, Any] | None
    backend: str
    recorded: bool
    routed: bool = False
    mode: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    dropped: list[str] = field(default_factory=list)


def default_dir(script: str) -> Path:
    """ks-trace/<script>-<time>: a fresh folder per run, so two runs never mix."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path("ks-trace") / f"{Path(script).stem or 'run'}-{stamp}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def _backend_name(backend: Any) -> str:
    if backend is None:
        return "inductor"
    if isinstance(backend, str):
        return backend
    return str(getattr(backend, "__name__", None) or type(backend).__name__)


def _is_ours(backend: Any) -> bool:
    from kernelscope.compiler import backend as ours

    return backend == OURS or backend is ours


class Recorder:
    """The torch.compile wrapper of one run, and what it saw."""

    def __init__(self, all_backends: bool) -> None:
        self.all_backends = all_backends
        self.calls: list[Call] = []

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def compile(model: Any = None, **kwargs: Any) -> Any:  # noqa: A001 - torch's name
            if model is None:  # decorator form: torch calls compile(fn, ...) again
                return real(None, **kwargs)
            return real(model, **self.route(kwargs))

        compile.__wrapped__ = real  # type: ignore[attr-defined]
        compile.__doc__ = real.__doc__
        return compile

    def route(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The arguments torch.compile gets for this call."""
        from kernelscope.compiler.trace.writer import call_site

        backend = kwargs.get("backend")
        ours = _is_ours(backend)
        call = Call(len(self.calls), call_site(), _backend_name(backend),
                    recorded=ours or self.all_backends, routed=not ours and self.all_backends,
                    mode=kwargs.get("mode") if isinstance(kwargs.get("mode"), str) else None,
                    fullgraph=bool(kwargs.get("fullgraph", False)),
                    dynamic=kwargs.get("dynamic"))
        self.calls.append(call)
        if not call.recorded:
            return kwargs
        kwargs = dict(kwargs)
        if call.routed:
            call.dropped = [k for k in ("mode", "options") if kwargs.pop(k, None) is not None]
        kwargs["backend"] = _recording_backend(asdict(call))
        return kwargs


def _recording_backend(call: dict[str, Any]) -> Callable[..., Any]:
    def kernelscope(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
        from kernelscope.compiler import backend
        from kernelscope.compiler.trace.writer import compile_call

        with compile_call(call):
            return backend(gm, example_inputs, **kwargs)

    return kernelscope


@contextlib.contextmanager
def recording(trace_dir: Path, recorder: Recorder) -> Iterator[None]:
    """torch.compile wrapped, and the trace directory in the environment, for one run."""
    import torch

    real = torch.compile
    before = os.environ.get(TRACE_DIR_ENV)
    os.environ[TRACE_DIR_ENV] = str(trace_dir.resolve())
    torch.compile = recorder.wrap(real)  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.compile = real
        if before is None:
            os.environ.pop(TRACE_DIR_ENV, None)
        else:
            os.environ[TRACE_DIR_ENV] = before


def run(target: str, args: list[str], trace_dir: Path, *, module: bool = False,
        all_backends: bool = False) -> int:
    """Runs the script (or module) under the recorder; returns its exit status."""
    trace_dir.mkdir(parents=True, exist_ok=True)
    recorder = Recorder(all_backends)
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [target, *args]
    if not module:
        sys.path.insert(0, str(Path(target).resolve().parent))
    status = 0
    started = time.time()
    try:
        with recording(trace_dir, recorder):
            if module:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException:  # the script's own failure: reported as python would, and kept
        traceback.print_exc()
        status = 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    _write_run(trace_dir, [("-m " if module else "") + target, *args], status, started,
               recorder)
    _summary(trace_dir, recorder)
    return status


def _write_run(trace_dir: Path, argv: list[str], status: int, started: float,
               recorder: Recorder) -> None:
    record = {"format": RUN_FORMAT, "version": VERSION, "versions": {"kernelscope": __version__},
              "argv": argv, "cwd": os.getcwd(), "exit": status,
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "seconds": round(time.time() - started, 3),
              "calls": [asdict(c) for c in recorder.calls]}
    found = process_rank()
    if found is not None:
        record.update(rank=found[0], world_size=found[1])
    folder = rank_dir(trace_dir)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps(record))
    os.replace(tmp, folder / RUN_FILE)


def _summary(trace_dir: Path, recorder: Recorder) -> None:
    """What was recorded, on stderr (the script owns stdout)."""
    graphs = [p for p in rank_dir(trace_dir).glob("*.json") if p.name != RUN_FILE]
    compiles = set()
    for p in graphs:
        try:
            compiles.add(json.loads(p.read_text()).get("compile_id"))
        except (OSError, ValueError):
            continue
    say = lambda text: print(f"kernelscope run: {text}", file=sys.stderr)  # noqa: E731
    say(f"recorded {len(graphs)} graphs of {len(compiles)} Dynamo compiles into {trace_dir}")
    for call in recorder.calls:
        site = call.site or {}
        where = f"{site.get('file')}:{site.get('line')}"
        if not call.recorded:
            say(f"torch.compile at {where} uses backend {call.backend!r}: not recorded "
                "(--all-backends routes it to Kernelscope)")
        elif call.routed:
            say(f"torch.compile at {where}: backend {call.backend!r} routed to Kernelscope"
                + (f" (dropped {', '.join(call.dropped)})" if call.dropped else ""))
    if graphs:
        say(f"open it: kernelscope open {trace_dir}")
