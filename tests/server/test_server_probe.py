"""The sandbox probe: a busy sandbox uid (EAGAIN) is waited out, never taken as a broken layer.

A fresh-clone CI run started a server while another test's job fork-bombed under the same
uid's RLIMIT_NPROC: `setpriv` failed with "Resource temporarily unavailable", the probe gave
up on seccomp, then on bubblewrap, then on the uid drop, and the worker ran as root.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.server.sandbox import launch as sandbox
from kernelscope.server.sandbox.launch import BUSY, Isolation, Limits, SandboxSpec

ISO = Isolation("rlimits-only")
SPEC = SandboxSpec(readonly=())
LIMITS = Limits()


def scripted(monkeypatch: pytest.MonkeyPatch, answers: list[str | None]) -> list[float]:
    """Make `_probe_once` return `answers` in turn; returns the sleeps taken between them."""
    sleeps: list[float] = []
    left = list(answers)
    monkeypatch.setattr(sandbox, "_probe_once", lambda *_a: left.pop(0))
    monkeypatch.setattr(sandbox.time, "sleep", sleeps.append)
    return sleeps


def test_a_busy_uid_is_tried_again_until_the_probe_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = f"setpriv: failed to execute /usr/bin/python: {BUSY}"
    sleeps = scripted(monkeypatch, [busy, busy, None])
    assert sandbox._probe(ISO, SPEC, LIMITS, Path(".")) is None
    assert len(sleeps) == 2 and sleeps[1] > sleeps[0] > 0


def test_any_other_failure_is_final_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps = scripted(monkeypatch, ["bwrap: No permissions to create new namespace", None])
    assert sandbox._probe(ISO, SPEC, LIMITS, Path(".")) == (
        "bwrap: No permissions to create new namespace")
    assert sleeps == []


def test_a_uid_that_stays_busy_fails_after_the_patience(monkeypatch: pytest.MonkeyPatch) -> None:
    sleeps = scripted(monkeypatch, [BUSY] * 100)
    clock = iter(range(0, 10_000))  # one second per reading of the clock
    monkeypatch.setattr(sandbox.time, "monotonic", lambda: float(next(clock)))
    assert sandbox._probe(ISO, SPEC, LIMITS, Path("."), patience_s=5.0) == BUSY
    assert 1 <= len(sleeps) <= 5
