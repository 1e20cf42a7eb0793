"""Load on the explorer: N concurrent compiles through the real server on loopback.

    PYTHONPATH=$PWD python scripts/load.py [--clients 50] [--mode local|rq] [--workers 2]
        [--queue-size 8] [--sample add_relu] [--queue redis://... --db postgresql://...]

Starts `kernelscope serve` (gunicorn, a temporary SQLite database) with local workers
(`--mode local`, `--max-jobs --workers`), or with `--mode rq`: the server on `--queue` and
`--db` plus `--workers` `kernelscope worker` processes on the same queue. Then `--clients`
threads each post the sample once, all at the same moment, and read their event stream to
`done`. It reports how many were done, told busy (503), or lost (no `done` and no 503:
an error, a hang past `--timeout`), and the p50 / p95 / max time from post to `done` of
those done. Every request goes to 127.0.0.1 and each client makes one request, so the run
is bounded. This is a benchmark, not a test: it prints numbers and asserts nothing.

`--abuse slowloris|streams|greedy|all` runs the abusive cases of issue 20 instead, each
bounded and on loopback only, and reports what a polite client saw meanwhile:

- slowloris: 80 sockets send a partial request header and hold it; `/api/health` timed;
- streams: 64 event streams held open on one running job; `/api/health` timed, and how
  many streams the server refused (429);
- greedy: one client (source address 127.0.0.2) submits 10 endless loops while 10 polite
  clients (127.0.0.3 ...) each submit the sample once; the greedy one's 429s, the polite
  ones' results and times.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
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


def wait_health(base: str, timeout: float) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(base + "/api/health", timeout=5) as r:
                health: dict[str, Any] = json.load(r)
            pool = health["jobs"].get("pool") or {}
            if not pool or pool.get("ready", 0) >= pool.get("size", 0):
                return health
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit("the server did not come up")


def one_client(base: str, code: str, go: threading.Event, timeout: float) -> dict[str, Any]:
    go.wait()
    start = time.perf_counter()
    body = json.dumps({"code": code, "options": {"device": "cpu", "backend": "cpp"}}).encode()
    request = urllib.request.Request(
        base + "/api/compile", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            job = json.load(r)
    except urllib.error.HTTPError as exc:
        return {"result": "busy" if exc.code == 503 else f"http {exc.code}"}
    except OSError as exc:
        return {"result": "lost", "why": str(exc)}
    try:
        with urllib.request.urlopen(base + job["events"], timeout=timeout) as r:
            for raw in r:
                if raw.startswith(b"data: "):
                    event = envelope(json.loads(raw[6:]))
                    if event.stage == "done":
                        data = data_as(event, JobDone)
                        return {
                            "result": "done",
                            "ok": data.ok if data is not None else None,
                            "s": time.perf_counter() - start,
                            "trace": bool(data is not None and data.trace_id),
                        }
    except OSError as exc:
        return {"result": "lost", "why": str(exc)}
    return {"result": "lost", "why": "stream ended without done"}


ENDLESS = "import time\nwhile True:\n    time.sleep(1)\n"


def request(port: int, method: str, path: str, body: Any = None, source: str = "127.0.0.1",
            timeout: float = 15.0) -> tuple[int, dict[str, str], bytes]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(source, 0))
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def timed_health(port: int) -> str:
    start = time.perf_counter()
    try:
        status = request(port, "GET", "/api/health", timeout=10)[0]
    except OSError as exc:
        return f"no answer ({exc})"
    return f"{status} in {time.perf_counter() - start:.2f} s"


def slowloris(port: int) -> None:
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(80)]
    try:
        for s in held:
            s.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        print(f"slowloris: 80 partial requests held; /api/health {timed_health(port)}")
        time.sleep(7)
        dropped = 0
        for s in held:
            s.settimeout(1)
            try:
                dropped += s.recv(1) == b""
            except OSError:
                dropped += 1
        print(f"slowloris: after 7 s the server had dropped {dropped} of 80")
    finally:
        for s in held:
            s.close()


def held_streams(port: int) -> None:
    status, _, body = request(port, "POST", "/api/compile", {"code": ENDLESS})
    job = json.loads(body)["job_id"]
    streams, refused = [], 0
    try:
        for _ in range(64):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(f"GET /api/jobs/{job}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            refused += b" 429 " in s.recv(200).split(b"\r\n")[0]
            streams.append(s)
        print(f"streams: 64 held on one job, {refused} refused (429); "
              f"/api/health {timed_health(port)}")
    finally:
        for s in streams:
            s.close()
        request(port, "POST", f"/api/jobs/{job}/cancel")


def greedy(port: int, code: str, timeout: float) -> None:
    answers = [request(port, "POST", "/api/compile", {"code": ENDLESS}, "127.0.0.2")[:2]
               for _ in range(10)]
    taken = [a for a in answers if a[0] == 202]
    retry = sorted({a[1].get("Retry-After", "-") for a in answers if a[0] == 429})
    print(f"greedy: 10 endless loops from one client: {len(taken)} accepted, "
          f"{sum(a[0] == 429 for a in answers)} told 429 (Retry-After {', '.join(retry)})")
    results: list[tuple[int, float, bool]] = [(0, 0.0, False)] * 10

    def polite(i: int) -> None:
        start = time.perf_counter()
        status, _, body = request(port, "POST", "/api/compile", {"code": code},
                                  f"127.0.0.{i + 3}")
        if status != 202:
            results[i] = (status, time.perf_counter() - start, False)
            return
        job = json.loads(body)["job_id"]
        _, _, events = request(port, "GET", f"/api/jobs/{job}/events?format=ndjson",
                               timeout=timeout)
        lines = [envelope(json.loads(x)) for x in events.splitlines() if x.strip()]
        done = data_as(lines[-1], JobDone) if lines else None
        ok = done is not None and done.ok
        results[i] = (status, time.perf_counter() - start, bool(ok))

    threads = [threading.Thread(target=polite, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 30)
    times = [r[1] for r in results if r[2]]
    print(f"greedy: 10 polite clients: {len(times)} done ok, statuses "
          f"{sorted(r[0] for r in results)}"
          + (f"; post to done p50 {statistics.median(times):.1f} s, max {max(times):.1f} s"
             if times else ""))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--mode", choices=("local", "rq"), default="local")
    p.add_argument("--workers", type=int, default=2, help="local workers, or RQ workers")
    p.add_argument("--queue-size", type=int, default=8)
    p.add_argument("--sample", default="add_relu")
    p.add_argument("--queue", default=os.environ.get("KERNELSCOPE_TEST_REDIS"))
    p.add_argument("--db", default=os.environ.get("KERNELSCOPE_TEST_POSTGRES"))
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--abuse", choices=("slowloris", "streams", "greedy", "all"),
                   help="run issue 20's abusive cases instead of the load")
    args = p.parse_args()
    code = (REPO / "samples" / f"{args.sample}.py").read_text()
    tmp = tempfile.mkdtemp(prefix="kernelscope-load-")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = [sys.executable, "-m", "kernelscope.server", "--port", str(port)]
    serve += ["--queue-size", str(args.queue_size)]
    procs: list[subprocess.Popen[bytes]] = []
    if args.mode == "local":
        serve += ["--db", f"{tmp}/traces.sqlite3", "--max-jobs", str(args.workers)]
    else:
        if not args.queue or not args.db:
            raise SystemExit("--mode rq needs --queue redis://... and --db postgresql://...")
        name = f"load{os.getpid()}"
        # The URLs carry passwords: in the environment, never in argv (`ps` shows argv).
        env.update(KERNELSCOPE_QUEUE_URL=args.queue, KERNELSCOPE_DATABASE=args.db)
        serve += ["--queue-name", name]
        worker = [sys.executable, "-m", "kernelscope.server.cli", "worker", "--queue-name", name]
        for _ in range(args.workers):
            procs.append(subprocess.Popen(worker, env=env, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True))
    procs.append(subprocess.Popen(serve, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True))
    try:
        health = wait_health(base, 180)
        if args.mode == "rq":
            time.sleep(15)  # the workers' warm pools
        if args.abuse:
            cases = ("slowloris", "streams", "greedy") if args.abuse == "all" else (args.abuse,)
            for case in cases:
                if case == "slowloris":
                    slowloris(port)
                elif case == "streams":
                    held_streams(port)
                else:
                    greedy(port, code, args.timeout)
            return 0
        print(f"{args.mode}: {args.workers} workers, queue {args.queue_size}, "
              f"sandbox {health['isolation']}, {args.clients} clients", flush=True)
        go = threading.Event()
        results: list[dict[str, Any]] = [{} for _ in range(args.clients)]

        def run(i: int) -> None:
            results[i] = one_client(base, code, go, args.timeout)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(args.clients)]
        for thread in threads:
            thread.start()
        started = time.perf_counter()
        go.set()
        for thread in threads:
            thread.join(args.timeout + 30)
        total = time.perf_counter() - started
        done = [r for r in results if r.get("result") == "done"]
        busy = [r for r in results if r.get("result") == "busy"]
        lost = [r for r in results if r.get("result") not in ("done", "busy")]
        times = [r["s"] for r in done]
        line = f"done {len(done)} (ok {sum(1 for r in done if r['ok'])}), busy {len(busy)}, "
        line += f"lost {len(lost)}"
        if times:
            line += (f"; post to done p50 {statistics.median(times):.1f} s, "
                     f"p95 {pct(times, 0.95):.1f} s, max {max(times):.1f} s")
        print(line + f"; all answered in {total:.1f} s")
        for r in lost[:5]:
            print("lost:", r)
    finally:
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
