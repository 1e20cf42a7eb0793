"""The event contract: one typed model, a JSON Schema generated from it and checked in."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
from ks_helpers import REPO
from ks_schema import check_event, check_stream

from kernelscope.compiler.events.schema import SCHEMA_PATH, schema_text
from kernelscope.compiler.events.stage import SCHEMA_VERSION, STAGES


def test_checked_in_schema_is_what_the_model_generates() -> None:
    """Regenerate with `python -m kernelscope.compiler.events.schema --write` after changing the
    model."""
    assert SCHEMA_PATH.read_text() == schema_text()


def test_the_event_modules_do_not_import_torch() -> None:
    code = ("import sys, kernelscope.compiler.events.stage, kernelscope.compiler.events.types; "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0


def test_server_uses_the_one_schema_version() -> None:
    from kernelscope.server.jobs import manager as jobs

    assert jobs.SCHEMA_VERSION is SCHEMA_VERSION
    assert json.loads(SCHEMA_PATH.read_text())["x-stages"] == list(STAGES)


GOOD_RUN = {"schema": SCHEMA_VERSION, "seq": 7, "stage": "run", "ms": 1.5,
            "data": {"ok": True, "atol": 1e-4, "rtol": 1e-4,
                     "outputs": [{"index": 0, "ok": True, "max_abs_err": 0.0}]}}


@pytest.mark.parametrize("edit", [
    lambda e: e["data"].pop("ok"),
    lambda e: e["data"].update(ok="yes"),
    lambda e: e["data"]["outputs"][0].update(index=1.5),
    lambda e: e.update(stage="teleport"),
    lambda e: e.update(schema=SCHEMA_VERSION + 1),
    lambda e: e.update(seq=-1),
    lambda e: e.pop("ms"),
])
def test_schema_rejects_malformed_events(edit: object) -> None:
    check_event(GOOD_RUN)
    bad = copy.deepcopy(GOOD_RUN)
    edit(bad)  # type: ignore[operator]
    with pytest.raises(AssertionError):
        check_event(bad)


def test_stream_rules() -> None:
    error = {"schema": SCHEMA_VERSION, "seq": 0, "stage": "error", "ms": 0,
             "data": {"stage": "source", "kind": "syntax", "message": "SyntaxError"}}
    done = {"schema": SCHEMA_VERSION, "seq": 1, "stage": "done", "ms": 0, "data": {"ok": False}}
    check_stream([error, done])
    with pytest.raises(AssertionError):  # a gap in seq
        check_stream([error, {**done, "seq": 2}])
    with pytest.raises(AssertionError):  # no done
        check_stream([error])
    with pytest.raises(AssertionError):  # run before source
        check_stream([{**GOOD_RUN, "seq": 0}, done])
    with pytest.raises(AssertionError):  # an error kind nobody defined
        check_stream([{**error, "data": {**error["data"], "kind": "oops"}}, done])
