"""The request body's deadline (server/web/gworker.py): a body that trickles past it is cut
with a 408, and one read to its end is not, however long its request took.

gunicorn reads the previous request's body once more before it parses the next request on
a kept-alive connection; a compile's event stream outlives the deadline, so a finished body
that raised there cost the connection its next request and logged an error per stream."""

from __future__ import annotations

import time

import pytest

gworker = pytest.importorskip("kernelscope.server.web.gworker")


class Body:
    """A stand-in for gunicorn's LengthReader: `length` counts the bytes still to come."""

    def __init__(self, data: bytes) -> None:
        self.data, self.length = data, len(data)

    def read(self, size: int) -> bytes:
        out, self.data = self.data[:size], self.data[size:]
        self.length -= len(out)
        return out


def test_a_body_read_to_its_end_reads_empty_after_the_deadline() -> None:
    body = Body(b"{}")
    reader = gworker.DeadlineReader(body, time.monotonic() + 60)
    assert reader.read(1024) == b"{}" and reader.finished
    reader.deadline = time.monotonic() - 1  # the event stream outlived the deadline
    assert reader.read(1024) == b""


def test_a_body_still_arriving_after_the_deadline_is_cut() -> None:
    reader = gworker.DeadlineReader(Body(b"x" * 10), time.monotonic() - 1)
    with pytest.raises(gworker.BodyTimeout):
        reader.read(1024)
