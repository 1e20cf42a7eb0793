"""Security headers on every response, and the page's script nonce.

In: each request (a fresh CSP nonce is drawn for it) and each response. Out: the headers
below on every answer, JSON and pages alike, and `page_html()` for the web UI's
index.html with the nonce and the CDN script's integrity hash put in.

- `Content-Security-Policy`: scripts only from this server, from inline scripts that carry
  this response's nonce, and from the one pinned cytoscape file on jsDelivr, whose bytes
  must match the vendored copy's SRI hash (an import map's `integrity`, which covers the
  dynamic `import()` in webui/js/libs.js; a mismatch fails the import and the page uses the
  vendored copy); no plugins, no `<base>`, no framing (`frame-ancestors 'none'`).
  Styles may be inline: CodeMirror and cytoscape set element styles.
- `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY` (browsers without CSP 2),
  `Referrer-Policy: no-referrer` (a permalink's id never leaks to another site),
  `Cross-Origin-Opener-Policy: same-origin`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from flask import Flask, Response, g

CDN_TEMPLATE = "https://cdn.jsdelivr.net/npm/cytoscape@{version}/dist/cytoscape.esm.min.mjs"
VENDORED = "vendor/cytoscape.esm.min.js"  # a byte copy of the npm file the CDN serves
STATIC_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
}


@dataclass(frozen=True)
class CdnScript:
    """The one script the page may load from a CDN, and the hash its bytes must have."""

    url: str
    integrity: str


def cdn_script(webui_dir: Path) -> CdnScript | None:
    """cytoscape on jsDelivr at the vendored version, or None if nothing is vendored."""
    try:
        versions = json.loads((webui_dir / "vendor" / "VERSIONS.json").read_text())
        body = (webui_dir / VENDORED).read_bytes()
    except (OSError, ValueError):
        return None
    version = versions.get("cytoscape") if isinstance(versions, dict) else None
    if not isinstance(version, str):
        return None
    digest = base64.b64encode(hashlib.sha384(body).digest()).decode()
    return CdnScript(CDN_TEMPLATE.format(version=version), f"sha384-{digest}")


def content_security_policy(nonce: str, cdn: CdnScript | None) -> str:
    scripts = f"'self' 'nonce-{nonce}'" + (f" {cdn.url}" if cdn else "")
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src {scripts}",
            "style-src 'self' 'unsafe-inline'",
            "img-src 'self' data: blob:",
            "font-src 'self' data:",
            "connect-src 'self'",
            "worker-src 'self'",  # the graph layout's worker (webui/js/layout.worker.js)
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    )


def nonce() -> str:
    """This request's CSP nonce (drawn on first use)."""
    if "csp_nonce" not in g:
        g.csp_nonce = secrets.token_urlsafe(18)
    value: str = g.csp_nonce
    return value


def page_html(index: str, cdn: CdnScript | None, links: str = "") -> str:
    """index.html with this request's nonce on every `<script>`, the CDN import map, and
    `links` (server/web/preload.py) at the end of its head."""
    n = html.escape(nonce(), quote=True)
    page = index.replace("<script", f'<script nonce="{n}"')
    if links:
        at = page.find("</head>")
        page = page[:at] + f"  {links}\n" + page[at:] if at >= 0 else page
    if cdn is None:
        return page
    imports = json.dumps({"integrity": {cdn.url: cdn.integrity}})
    importmap = f'<script type="importmap" nonce="{n}">{imports}</script>\n  '
    at = page.find(f'<script nonce="{n}"')
    at = at if at >= 0 else page.find("</head>")
    return page[:at] + importmap + page[at:] if at >= 0 else page


def register(app: Flask, cdn: CdnScript | None) -> None:
    @app.after_request
    def security_headers(response: Response) -> Response:
        for key, value in STATIC_HEADERS.items():
            response.headers.setdefault(key, value)
        response.headers["Content-Security-Policy"] = content_security_policy(nonce(), cdn)
        return response
