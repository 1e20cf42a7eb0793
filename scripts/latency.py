"""Click-to-result latency of the explorer, measured through the real server on loopback.

    PYTHONPATH=$PWD python scripts/latency.py [--runs 7] [--sample add_relu] [--pool 2]
                                              [--device cpu|cuda] [--backend cpp|triton]
                                              [--back-to-back] [--server URL] [--log FILE]
                                              [--inductor] [--options JSON]
                                              [--file SNIPPET.py] [--max-jobs N]

Starts `kernelscope serve` (gunicorn, the real compiler CLI, the sandbox, a temporary
database) on a free loopback port, waits until its warm workers are ready, then posts the
sample `--runs` times, one after another, each time reading the SSE stream and timing, from
the moment the POST is sent: the first event (`source`, the "first stage") and `done`. It
prints each run, then the medians, next to the `wall_ms` and `stages_ms` the `done` event
carries, and `silence_s`: the longest the stream went without an event (the POST
counts as one), `silences` the three longest (seconds, when, the event before), `progress`
how many heartbeats came, with `waiting` saying whether the server said the job waited. Between
runs it waits until the pool is warm again, as a person reading the result
before the next click would; `--back-to-back` posts at once instead. `--pool 0` measures
cold workers (every job imports torch). `--server URL` measures a server already running.
The server gets a new, empty shared kernel cache (so run 1 builds its kernel with g++ and
later runs find it), unless `--keep-cache`.

This is a benchmark, not a test: it prints numbers and asserts nothing.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from kernelscope.compiler.events.read import data_as, envelope
from kernelscope.compiler.events.types import JobDone

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(base: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(base + path, timeout=10) as r:
        body: dict[str, Any] = json.load(r)
        return body


def wait_pool(base: str, timeout: float, proc: subprocess.Popen[bytes] | None = None
              ) -> dict[str, Any]:
    """Until the server answers, runs no job and has every worker ready (or timeout)."""
    end = time.monotonic() + timeout
    health: dict[str, Any] = {}
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            health = get_json(base, "/api/health")
            jobs = health.get("jobs", {})
            pool = jobs.get("pool")
            # A job's runner is busy until the shared cache has taken its entries.
            if jobs.get("running", 0) == 0 and (
                    pool is None or pool["size"] == 0 or pool["ready"] >= pool["size"]):
                return health
        except OSError:
            pass
        time.sleep(0.2)
    return health


def one_run(host: str, port: int, code: str, options: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"code": code, "options": options})
    start = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=120)
    conn.request("POST", "/api/compile", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    job = json.loads(reply.read())
    if reply.status != 202:
        return {"error": job}
    conn.request("GET", job["events"])
    stream = conn.getresponse()
    first = done = None
    last: JobDone | None = None
    stages: dict[str, float] = {}
    at: dict[str, float] = {}  # seconds from the POST to the first event of each stage
    times = [0.0]  # the POST, then every event: the longest silence is the widest gap
    names = ["POST"]  # what each of `times` was
    while True:
        line = stream.fp.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            event = envelope(json.loads(line[6:]))
            now = time.perf_counter() - start
            first = now if first is None else first
            times.append(now)
            names.append(event.stage if event.stage != "progress"
                         else f"progress {str(event.data.get('message'))[:70]}")
            stages[event.stage] = round(event.ms, 1)
            at.setdefault(event.stage, round(now, 3))
            if event.stage == "done":
                done, last = now, data_as(event, JobDone)
                break
    conn.close()
    graphs = [at[s] for s in ("capture_graph", "capture") if s in at]
    return {
        "first_s": first,
        "silence_s": round(max(b - a for a, b in zip(times, times[1:])), 3),
        "silences": sorted(((round(b - a, 3), round(a, 2), what) for a, b, what
                            in zip(times, times[1:], names)), reverse=True)[:3],
        "progress": sum(n.startswith("progress") for n in names),
        "waiting": stages.get("waiting") is not None,
        "source_s": at.get("source"),
        "first_graph_s": min(graphs) if graphs else None,
        "done_s": done,
        "ok": last.ok if last is not None else None,
        "wall_ms": last.wall_ms if last is not None else None,
        "stages_ms": last.stages_ms if last is not None else None,
        "stages": stages,
        "at": at,
        "trace_id": last.trace_id if last is not None else None,
    }


def inductor_cold(sample: Path, device: str) -> float:
    """Seconds of the first call of `torch.compile(entry)` in a fresh process with empty
    Inductor and Triton caches (its cold compile), less one eager call."""
    probe = f"""import runpy, time, torch
ns = runpy.run_path({str(sample)!r})
fn = ns[{sample.stem!r}]
args = [a.to({device!r}) for a in ns["example_inputs"]]
fn(*args); torch.cuda.synchronize() if {device!r} == "cuda" else None
t = time.perf_counter(); fn(*args)
torch.cuda.synchronize() if {device!r} == "cuda" else None
eager = time.perf_counter() - t
t = time.perf_counter(); torch.compile(fn)(*args)
torch.cuda.synchronize() if {device!r} == "cuda" else None
print(time.perf_counter() - t - eager)
"""
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor",
               "TRITON_CACHE_DIR": f"{tmp}/triton"}
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                             text=True, check=True, timeout=600)
    return float(out.stdout.split()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--sample", default="add_relu")
    p.add_argument("--file", help="a snippet file to post instead of a sample "
                   "(e.g. benchmarks/snippets/llama6_train.py)")
    p.add_argument("--backend", default="cpp")
    p.add_argument("--device", default="cpu")
    p.add_argument("--log", help="the started server's stderr goes here")
    p.add_argument("--save-trace", help="write the last run's stored trace (JSON) here")
    p.add_argument("--inductor-cold", action="store_true",
                   help="also time Inductor's cold compile of the sample (fresh process)")
    p.add_argument("--pool", type=int, default=2, help="warm workers (0: cold)")
    p.add_argument("--inductor", action="store_true",
                   help="compare with TorchInductor (its event comes after `profile`: see `at`)")
    p.add_argument("--back-to-back", action="store_true")
    p.add_argument("--options", default="{}",
                   help="more compile options, JSON (e.g. '{\"compile_workers\": 4}')")
    p.add_argument("--server", help="measure this running server instead of starting one")
    p.add_argument("--max-jobs", type=int, help="the started server's MAX_JOBS")
    p.add_argument(
        "--keep-cache",
        action="store_true",
        help="use the server's default shared kernel cache (else a new, empty one, so the "
        "first run builds its kernel)",
    )
    args = p.parse_args()
    snippet = Path(args.file) if args.file else REPO / "samples" / f"{args.sample}.py"
    code = snippet.read_text()
    options = {"device": args.device, "backend": args.backend, "inductor": args.inductor,
               **json.loads(args.options)}
    proc = None
    if args.server:
        base = args.server.rstrip("/")
    else:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        tmp = tempfile.mkdtemp(prefix="kernelscope-latency-")
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        cmd = [sys.executable, "-m", "kernelscope.server", "--port", str(port),
               "--db", f"{tmp}/t.sqlite3"]
        cmd += ["--pool", str(args.pool)]
        config_json: dict[str, Any] = {} if args.keep_cache else {"KERNEL_CACHE": f"{tmp}/kernels"}
        if args.max_jobs:
            config_json["MAX_JOBS"] = args.max_jobs
        if config_json:
            config = Path(tmp) / "config.json"
            config.write_text(json.dumps(config_json))
            cmd += ["--config", str(config)]
        if shutil.which("bwrap"):
            # Measure the sandbox as deployed; under `auto` a probe that fails on a loaded
            # host would silently fall back to rlimits-only (and no shared kernel cache).
            cmd += ["--isolation", "bubblewrap"]
        log = open(args.log, "ab") if args.log else subprocess.DEVNULL  # noqa: SIM115
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
    host, port_s = base.split("//")[1].split(":")
    try:
        health = wait_pool(base, 180, proc)
        pool = health["jobs"].get("pool")
        print(f"server {base}: sandbox {health.get('isolation')}, pool {pool}")
        results = []
        for i in range(args.runs):
            if not args.back_to_back:
                wait_pool(base, 120, proc)
            r = one_run(host, int(port_s), code, options)
            results.append(r)
            print(f"run {i + 1}: {json.dumps(r)}", flush=True)
        good = [r for r in results if r.get("done_s") is not None]
        for label, runs in (("", good), (" after run 1", good[1:])):
            if not runs:
                continue
            med = {k: statistics.median(float(r[k] or 0) for r in runs)
                   for k in ("first_s", "source_s", "first_graph_s", "done_s", "wall_ms",
                             "stages_ms")}
            print(
                f"median over {len(runs)} runs{label}: first stage {med['first_s']:.3f} s, "
                f"source {med['source_s']:.3f} s, first graph {med['first_graph_s']:.3f} s, "
                f"done {med['done_s']:.3f} s (server wall {med['wall_ms']:.0f} ms, "
                f"stage sum {med['stages_ms']:.0f} ms); all ok: {all(r['ok'] for r in runs)}"
            )
        print(f"kernel cache: {get_json(base, '/api/health')['jobs'].get('kernel_cache')}")
        if args.save_trace and good and good[-1].get("trace_id"):
            trace = get_json(base, f"/api/traces/{good[-1]['trace_id']}")
            Path(args.save_trace).write_text(json.dumps(trace))
        if args.inductor_cold:
            sample = snippet
            print(f"inductor cold compile: {inductor_cold(sample, args.device):.2f} s")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
