"""The savings page (GET /dashboard): one HTML file with its style and script inline, built once in create_app.

It holds no figures, so it is served to anyone: its script fetches them from /savings, which is behind the proxy keys
(a browser's navigation sends no Authorization; the script does, with a key it asks for once and keeps in the tab's
sessionStorage). Nothing else is loaded: the Content-Security-Policy allows this script and this style sheet, by
their hashes, and requests to the proxy itself, and nothing more.
"""

from __future__ import annotations

import base64
import hashlib
from importlib.resources import files


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


class Dashboard:
    def __init__(self) -> None:
        page = files("app.savings") / "page"
        script = (page / "dashboard.js").read_text()
        style = (page / "dashboard.css").read_text()
        html = (page / "dashboard.html").read_text()
        self.body = html.replace("{{style}}", style).replace("{{script}}", script).encode()
        self.headers = {
            "content-security-policy": "; ".join(
                [
                    "default-src 'none'",
                    f"script-src {_hash(script)}",
                    f"style-src {_hash(style)}",
                    "connect-src 'self'",
                    "img-src 'none'",
                    "base-uri 'none'",
                    "form-action 'none'",
                    "frame-ancestors 'none'",
                ]
            ),
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
            "cache-control": "no-cache",
        }
