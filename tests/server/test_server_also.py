"""Issue 30, the "also" row: /api/health answered 500 while Redis was down (now 503 with a
reason, at once, and 200 once Redis is back); the cancel route took a cross-origin post."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from server_support import AppFactory, wait_until

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="no redis-server on this host")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redis(port: int, folder: Path) -> subprocess.Popen[bytes]:
    import redis

    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def pings() -> bool:
        try:
            return bool(redis.Redis(port=port).ping())
        except redis.ConnectionError:
            return False

    assert wait_until(pings, 10)
    return proc


def test_health_is_503_with_a_reason_while_redis_is_down(make_app: AppFactory,
                                                         tmp_path: Path) -> None:
    port = _free_port()
    server = _redis(port, tmp_path)
    try:
        app = make_app(QUEUE_URL=f"redis://127.0.0.1:{port}/0", QUEUE_NAME="health")
        client = app.test_client()
        assert client.get("/api/health").status_code == 200
        server.kill()
        server.wait(10)
        start = time.monotonic()
        answer = client.get("/api/health")
        took = time.monotonic() - start
        assert answer.status_code == 503, answer.get_data(as_text=True)[:300]
        body = answer.get_json()
        assert body["ok"] is False and "Redis" in body["reason"] and took < 0.5, (body, took)
        server = _redis(port, tmp_path)
        assert wait_until(lambda: client.get("/api/health").status_code == 200, 10)
    finally:
        server.kill()
        server.wait(10)


def test_the_cancel_route_refuses_cross_origin_posts(make_app: AppFactory) -> None:
    """Issue 30, 'also': a form on any page could post /api/jobs/<id>/cancel."""
    from server_support import submit

    client = make_app(JOB_TIMEOUT_S=30).test_client()
    job = submit(client, "# fake-sleep: 3\nx = 1\n")
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"},
                    {"Sec-Fetch-Site": "cross-site"}):
        answer = client.post(f"/api/jobs/{job}/cancel", headers=headers,
                             data="x=1", content_type="application/x-www-form-urlencoded")
        assert answer.status_code == 403, (headers, answer.get_json())
    assert client.get(f"/api/jobs/{job}").get_json()["state"] != "finished"
    same = client.post(f"/api/jobs/{job}/cancel", headers={"Origin": "http://localhost"})
    assert same.status_code == 202, same.get_json()


def test_a_password_never_goes_on_a_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30, 'also': workers got the Redis password in argv (visible in `ps`)."""
    from kernelscope.server.cli import config_from, parser

    secret = "redis://kernelscope:s3cret@127.0.0.1:6390/0"
    for flag in ("--queue", "--db"):
        args = parser().parse_args(["worker", flag, secret])
        with pytest.raises(SystemExit, match="KERNELSCOPE_"):
            config_from(args)
    monkeypatch.setenv("KERNELSCOPE_QUEUE_URL", secret)
    monkeypatch.setenv("KERNELSCOPE_DATABASE", "postgresql://k:pw@127.0.0.1/k")
    config = config_from(parser().parse_args(["worker", "--queue-name", "q"]))
    assert config["QUEUE_URL"] == secret and config["DATABASE"].endswith("/k")
    script = (Path(__file__).resolve().parents[2] / "scripts" / "services.sh").read_text()
    assert "--pass" not in script and '">$pass"' not in script  # redis-cli, redis-server
    assert "REDISCLI_AUTH" in script and 'redis-server "$DIR/redis.conf"' in script
    for line in Path(__file__).resolve().parents[2].joinpath("scripts", "load.py").read_text(
            ).splitlines():
        assert not ('"--queue", args.queue' in line or '"--db", args.db' in line), line
