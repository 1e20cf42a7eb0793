"""GET /api/schema publishes the event contract the compiler generates."""

from __future__ import annotations

import json

from flask.testing import FlaskClient

from kernelscope.compiler.events.schema import SCHEMA_PATH
from kernelscope.compiler.events.stage import SCHEMA_VERSION, STAGES


def test_schema_route_serves_the_checked_in_schema(client: FlaskClient) -> None:
    body = client.get("/api/schema").get_json()
    assert body["version"] == SCHEMA_VERSION
    assert body["stages"] == list(STAGES)
    assert body["terminal"] == ["error", "done"]
    assert body["schema"] == json.loads(SCHEMA_PATH.read_text())


def test_schema_route_answers_the_same_text_made_once(client: FlaskClient) -> None:
    first = client.get("/api/schema")
    assert first.status_code == 200 and first.mimetype == "application/json"
    assert client.get("/api/schema").data == first.data
    assert first.get_json()["follow_ups"] and first.get_json()["parts"]
