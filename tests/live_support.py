"""A WSGI app served live on loopback, for the tests that drive a real browser (tests/browser,
tests/server/test_server_csp_browser.py)."""

from __future__ import annotations

import logging
import threading
from typing import Any


class LiveServer:
    """A WSGI app served on 127.0.0.1 from a background thread."""

    def __init__(self, app: Any) -> None:
        from werkzeug.serving import make_server

        self.app = app
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.thread.join(timeout=5)
