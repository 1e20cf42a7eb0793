"""Follow-ups (server/jobs/followups.py): `done`, and so the permalink, never waits for the
Inductor comparison; its event is appended to the stored trace after `done`, and one
that cannot finish is stored as such.

The fake worker (fake_worker.py) holds its `inductor` event until a file appears in its
scratch directory (`# fake-inductor: wait`, `open_gates`), so each test sees the state
before it by order, not time.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from server_support import AppFactory, state, stream, submit, wait_until

from kernelscope.server.jobs.followups import states
from kernelscope.server.store.sqlite import TraceStore

ALL_BACKENDS = True


def follow_ups(client: FlaskClient, trace_id: str) -> dict[str, Any]:
    response = client.get(f"/api/traces/{trace_id}/follow-ups")
    assert response.status_code == 200, response.get_json()
    answer: dict[str, Any] = response.get_json()
    return answer


CODE = "x = 1\n"  # the fake front exec()s it: no torch to import
WAIT = f"{CODE}# fake-inductor: wait\n"


def open_gates(scratch: Path) -> None:
    """Let every held fake Inductor finish: the gate file in each job's back directory."""
    for back in scratch.glob("*/back"):
        (back / "inductor-gate").touch()


def finished(client: FlaskClient, job_id: str) -> bool:
    return client.get(f"/api/jobs/{job_id}").get_json()["state"] == "finished"


def test_done_and_the_permalink_come_before_inductor_which_is_appended_later(
    make_app: AppFactory, tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    client = make_app(JOB_TIMEOUT_S=30, SCRATCH_ROOT=str(scratch)).test_client()
    job_id = submit(client, WAIT, inductor=True)
    # Inductor is held until the gate opens: the job is done all the same.
    assert wait_until(lambda: finished(client, job_id), 15), "done waited for Inductor"
    events = stream(client, job_id)
    stages = [e["stage"] for e in events]
    assert stages[-1] == "done" and "inductor" not in stages, stages
    done = events[-1]["data"]
    assert done["ok"] is True
    assert done["follow_ups"] == ["inductor"] and done["follow_ups_until"] > time.time()
    trace_id = done["trace_id"]
    assert follow_ups(client, trace_id) == {"follow_ups": {"inductor": "running"},
                                            "events": []}
    stored = client.get(f"/api/traces/{trace_id}").get_json()
    assert stored["follow_ups"] == {"inductor": "running"}
    assert stored["events"][-1]["stage"] == "done"

    open_gates(scratch)
    assert wait_until(lambda: follow_ups(client, trace_id)["follow_ups"]
                      == {"inductor": "done"}, 15)
    later = follow_ups(client, trace_id)["events"]
    assert [e["stage"] for e in later] == ["inductor"]
    inductor = later[0]
    assert inductor["seq"] == events[-1]["seq"] + 1 and inductor["origin"] == "compiler"
    assert inductor["data"]["measured"] is True
    assert inductor["data"]["kernels"][0]["ms"] == 0.0123
    stored = client.get(f"/api/traces/{trace_id}").get_json()
    assert [e["stage"] for e in stored["events"]][-2:] == ["done", "inductor"]
    assert stored["events"][:-1] == events  # nothing the stream had is lost or changed
    # The job's own stream still ends at `done`, replayed from memory or the store.
    assert [e["stage"] for e in stream(client, job_id)][-1] == "done"


def test_a_compile_without_inductor_lists_no_follow_up(client: FlaskClient) -> None:
    events = stream(client, submit(client, CODE))
    assert events[-1]["data"].get("follow_ups") is None
    assert follow_ups(client, events[-1]["data"]["trace_id"]) == {"follow_ups": {},
                                                                  "events": []}


def stored_follow_up(client: FlaskClient, code: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compile with Inductor; the job's `done` and the follow-up event stored for it."""
    job_id = submit(client, code, inductor=True)
    events = stream(client, job_id)
    assert events[-1]["stage"] == "done" and events[-1]["data"]["ok"] is True, events[-2:]
    trace_id = events[-1]["data"]["trace_id"]
    assert wait_until(lambda: follow_ups(client, trace_id)["follow_ups"]
                      == {"inductor": "done"}, 15), follow_ups(client, trace_id)
    (event,) = follow_ups(client, trace_id)["events"]
    return events[-1], event


def test_a_crash_in_inductor_is_stored_as_its_failure_not_the_jobs(
    client: FlaskClient,
) -> None:
    done, event = stored_follow_up(client, f"{CODE}# fake-inductor: crash\n")
    assert event["stage"] == "inductor" and event["origin"] == "server"
    assert event["data"]["measured"] is False
    assert "SIGSEGV" in event["data"]["error"], event["data"]
    assert "inductor stage" in event["data"]["error"]


def test_an_inductor_that_outlives_the_job_clock_is_stored_as_timed_out(
    make_app: AppFactory,
) -> None:
    client = make_app(JOB_TIMEOUT_S=2).test_client()
    _, event = stored_follow_up(client, f"{CODE}# fake-inductor: hang\n")
    assert event["data"]["measured"] is False
    assert event["data"]["error"].startswith("Timed out"), event["data"]


def test_the_compilers_own_error_in_inductor_is_the_follow_ups_failure(
    client: FlaskClient,
) -> None:
    done, event = stored_follow_up(client, f"{CODE}# fake-inductor: error\n")
    assert done["data"]["ok"] is True
    assert event["data"]["measured"] is False
    assert "inductor broke" in event["data"]["error"]


def test_a_worker_that_ends_without_inductor_stores_that(client: FlaskClient) -> None:
    _, event = stored_follow_up(client, f"{CODE}# fake-inductor: silent\n")
    assert event["data"]["measured"] is False
    assert "without sending it" in event["data"]["error"]


def test_a_server_stopping_stores_the_running_follow_up_as_stopped(
    make_app: AppFactory, backend: str
) -> None:
    if backend == "redis":
        pytest.skip("a web tier holds no job to stop: its RQ workers finish theirs")
    app = make_app(JOB_TIMEOUT_S=30)
    client = app.test_client()
    job_id = submit(client, WAIT, inductor=True)
    assert wait_until(lambda: finished(client, job_id), 15)
    trace_id = stream(client, job_id)[-1]["data"]["trace_id"]
    state(app).jobs.stop("The server is stopping")
    answer = follow_ups(client, trace_id)
    assert answer["follow_ups"] == {"inductor": "done"}
    assert "The server is stopping" in answer["events"][0]["data"]["error"]


def test_a_follow_up_past_its_time_without_its_event_reads_lost(tmp_path: Path) -> None:
    """A server that died mid-way never stores it: past `follow_ups_until` it is lost."""
    store = TraceStore(tmp_path / "t.sqlite3")
    done = {"schema": 1, "seq": 1, "stage": "done", "ms": 0.0,
            "data": {"ok": True, "follow_ups": ["inductor"], "follow_ups_until": 1000.0}}
    ident = store.put("x = 1\n", {}, [{"schema": 1, "seq": 0, "stage": "profile", "ms": 1.0,
                                      "data": {}}, done], True)
    trace = store.get(ident)
    assert trace is not None
    assert states(trace, now=999.0) == {"inductor": "running"}
    assert states(trace, now=1001.0) == {"inductor": "lost"}
    event = {"schema": 1, "seq": 2, "stage": "inductor", "ms": 5.0, "data": {"measured": True}}
    store.add_follow_up(ident, event)
    store.add_follow_up(ident, {**event, "data": {"measured": False}})  # one per stage
    trace = store.get(ident)
    assert trace is not None and trace["events"][-1] == event
    assert states(trace, now=1001.0) == {"inductor": "done"}


def test_a_follow_up_is_spooled_while_the_database_is_down(tmp_path: Path) -> None:
    """Like a trace (server/store/spool.py): held on disk, served at once, written once the
    database answers again, after its trace."""
    from server_support import down_store

    from kernelscope.server.store.spool import SpoolingStore

    inner = down_store(tmp_path / "t.sqlite3")
    store = SpoolingStore(inner, tmp_path / "spool")
    done = {"schema": 1, "seq": 0, "stage": "done", "ms": 0.0,
            "data": {"ok": True, "follow_ups": ["inductor"], "follow_ups_until": 1e12}}
    ident = store.put("x = 1\n", {}, [done], True)
    event = {"schema": 1, "seq": 1, "stage": "inductor", "ms": 5.0, "data": {"measured": True}}
    store.add_follow_up(ident, event)
    spooled = store.get(ident)
    assert spooled is not None and spooled["events"][-1] == event
    inner.down = False
    assert store.flush(force=True) == 1
    assert sorted(p.name for p in (tmp_path / "spool").iterdir()) == []
    stored = inner.get(ident)
    assert stored is not None and [e["stage"] for e in stored["events"]] == ["done", "inductor"]
    assert states(stored) == {"inductor": "done"}


def test_triton_under_the_interpreter_lists_its_offline_stages_as_a_follow_up() -> None:
    """Triton's stages compiled offline for a GPU target held `done` back by 20 s; a job
    whose Triton kernels run under the interpreter now lists them as a follow-up, by the
    compiler's own rule (CompileOptions.follow_ups), so `done` never waits for them."""
    from kernelscope.server.jobs.followups import asked
    from kernelscope.server.web.options import parse_options

    def listed(**raw: Any) -> list[str]:
        return asked(parse_options({"device": "cpu", **raw}))

    assert listed(backend="triton") == ["gpu_stages"]
    assert listed(backend="triton", inductor=True) == ["inductor", "gpu_stages"]
    assert listed(backend="triton", gpu_target="") == []
    assert listed(backend="cpp", inductor=True) == ["inductor"] and listed() == []
