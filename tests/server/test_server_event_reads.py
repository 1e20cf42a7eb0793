"""The server and its scripts read events through compiler/events/read.py: `envelope(e)` for
an event's stage, seq, ms and origin, `data_as(event, JobDone)` for a stage's payload as its
dataclass. Reading a stored event as a raw dict (`e["stage"]`, `event["data"].get("ok")`)
would be a second, untyped reader: a field renamed in the model (compiler/events/types.py)
would pass mypy there and break at run time.

The check reads the source as text; a write (`event["origin"] = origin`) is not a read, and
the relay's worker channel (bytes from a sandbox, parsed by server/jobs/inputs.py) has no events
yet, only a JSON object to take them from.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [*sorted((ROOT / "server").rglob("*.py")), ROOT / "scripts" / "latency.py",
           ROOT / "scripts" / "load.py"]
_FIELD = r"""["'](?:stage|data|ms|seq|origin)["']"""
RAW_READ = re.compile(rf"""\[\s*{_FIELD}\s*\](?!\s*=[^=])|\.get\(\s*{_FIELD}""")


def _raw_reads(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1)
            if RAW_READ.search(line.split("#", 1)[0])]


def test_no_server_module_reads_an_event_as_a_raw_dict() -> None:
    assert len(SCANNED) > 30
    found = [f"{p.relative_to(ROOT)}:{n}" for p in SCANNED for n in _raw_reads(p.read_text())]
    assert not found, "events read as raw dicts (use event_read.envelope / data_as):\n" + \
        "\n".join(found)


def test_the_check_sees_planted_reads() -> None:
    assert _raw_reads('    if not any(e["stage"] == "error" for e in job.events):\n') == [1]
    assert _raw_reads("    trace_id = done['data'].get('trace_id')\n") == [1]
    assert _raw_reads('    total = sum(float(e.get("ms") or 0.0) for e in events)\n') == [1]
    assert not _raw_reads('    event["origin"] = origin\n')  # a write
    assert not _raw_reads('    event = {"stage": stage, "data": data}\n')  # made, not read
    assert not _raw_reads("    if envelope(e).stage == 'error':  # e['stage']\n")
