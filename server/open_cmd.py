"""`kernelscope open DIR`: a recorded run (compiler/trace/writer.py) in the explorer.

In: a trace directory, or a TORCH_TRACE log of a stock torch.compile run (the log file, or
its directory: compiler/trace/torch_trace_events.py `log_file`; read here, line by line,
and stored into the database, with or without a server running). Out: a stored trace with
a permalink, printed, and the explorer on it.
- The files are checked here first (compiler/trace/reader.py), so a refusal is printed
  before anything is sent or stored.
- A server that answers (`--server URL`, else the local `kernelscope serve` default,
  http://127.0.0.1:8765) gets them through `POST /api/traces`, the same endpoint the web
  UI's upload uses, and the browser opens its permalink.
- A directory of a multi-process run (`rank0/`, `rank1/`, ...: compiler/trace/ranks.py)
  stores every other rank first, then rank 0 with a link to each, and opens rank 0.
- With none answering, the trace goes straight into the database `kernelscope serve` reads
  (`--db`, else its default) through the same store glue (server/web/uploads.py), and then
  `kernelscope serve` starts on it with the browser on the permalink (`--no-serve`: only
  store it and say how to view it).
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
import webbrowser
from pathlib import Path
from typing import Any

from kernelscope.compiler.trace.ranks import rank_dirs, rank_zero_files
from kernelscope.compiler.trace.reader import Opened, TraceRefused, open_files, read_dir
from kernelscope.compiler.trace.torch_trace_events import log_file, open_log

LOCAL = "http://127.0.0.1:8765"
HEALTH_TIMEOUT_S = 2.0
UPLOAD_TIMEOUT_S = 120.0


def _say(text: str) -> None:
    print(f"kernelscope open: {text}", file=sys.stderr, flush=True)


def _answers(server: str) -> bool:
    try:
        with urllib.request.urlopen(f"{server}/api/health", timeout=HEALTH_TIMEOUT_S) as r:
            return bool(r.status == 200)
    except (OSError, ValueError):
        return False


def upload(server: str, files: list[tuple[str, bytes]]) -> dict[str, Any]:
    """POST the files to a server; its JSON answer (RuntimeError with its error if refused)."""
    body = json.dumps({"files": [{"name": n, "text": raw.decode("utf-8")} for n, raw in files]})
    req = urllib.request.Request(f"{server}/api/traces", data=body.encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=UPLOAD_TIMEOUT_S) as r:
            answer: dict[str, Any] = json.loads(r.read())
            return answer
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read()).get("error") or e.reason
        except ValueError:
            message = e.reason
        raise RuntimeError(f"the server refused the trace (HTTP {e.code}): {message}") from None


def open_dir(directory: str, server: str | None = None, db: str | None = None,
             serve: bool = True, browser: bool = True) -> tuple[int, str | None]:
    """The exit code, and the database `kernelscope serve` should run on next (None: none)."""
    log = log_file(directory)
    if log is not None:
        return _open_log(log, db, serve, browser)
    target = (server or LOCAL).rstrip("/")
    remote = server is not None or _answers(target)
    if remote and not _answers(target):
        _say(f"no Kernelscope server answers at {target}")
        return 2, None
    try:
        ranks = rank_dirs(Path(directory))
        files = rank_zero_files(Path(directory), ranks, lambda fs: _put(
            fs, target if remote else None, db)) if ranks else read_dir(directory)
        opened = open_files(files)
    except (TraceRefused, RuntimeError, OSError) as e:
        _say(f"cannot open {directory}: {e}")
        return 2, None
    for notice in opened.notices:
        _say(f"note: {notice}")
    if remote:
        try:
            answer = upload(target, files)
        except (RuntimeError, OSError) as e:
            _say(str(e))
            return 2, None
        url = f"{target}{answer['url']}"
        print(url, flush=True)
        if browser:
            webbrowser.open(url)
        return 0, None
    return _store_locally(files, db, serve, browser)


def _put(files: list[tuple[str, bytes]], server: str | None, db: str | None) -> str:
    """One rank's trace stored (uploaded to `server`, else into the database): its path."""
    if server is not None:
        return str(upload(server, files)["url"])
    from kernelscope.server.config import default_database
    from kernelscope.server.store.sqlite import open_store
    from kernelscope.server.web.uploads import store_files

    ident, _ = store_files(open_store(db or default_database()), files)
    _say(f"stored as trace {ident}")
    return f"/t/{ident}"


def _open_log(log: Any, db: str | None, serve: bool, browser: bool) -> tuple[int, str | None]:
    """A TORCH_TRACE log of a stock torch.compile run: read here, line by line, and stored
    into the database (a running server's upload takes Kernelscope trace files only)."""
    _say(f"reading {log} (a TORCH_TRACE log)")
    try:
        opened = open_log(log)
    except (TraceRefused, OSError) as e:
        _say(f"cannot open {log}: {e}")
        return 2, None
    for notice in opened.notices:
        _say(f"note: {notice}")
    return _store_locally(opened, db, serve, browser)


def _store_locally(files: list[tuple[str, bytes]] | Opened, db: str | None, serve: bool,
                   browser: bool) -> tuple[int, str | None]:
    from kernelscope.server.config import default_config, default_database
    from kernelscope.server.store.sqlite import open_store
    from kernelscope.server.web.uploads import conformed, store_files, within_limit

    database = db or default_database()
    try:
        if isinstance(files, Opened):  # a log: the trace limit a served trace has
            read = conformed(files)
            done = within_limit(read, int(default_config()["TRACE_LIMIT_MB"]) << 20)
            ident = open_store(database).put(read.code, read.options, done, True)
        else:
            ident, _ = store_files(open_store(database), files)
    except TraceRefused as e:
        _say(f"cannot open the trace: {e}")
        return 2, None
    url = f"{LOCAL}/t/{ident}"
    _say(f"stored as trace {ident} in {database}")
    print(url, flush=True)
    if not serve:
        _say(f"view it: kernelscope serve --db {database}, then {url}")
        return 0, None
    if browser:  # once the server has had a moment to bind
        threading.Timer(3.0, webbrowser.open, args=(url,)).start()
    return 0, database
