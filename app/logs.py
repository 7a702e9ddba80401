"""Logging for the proxy process. Nothing here may ever print a key, a header value or a query string."""

from __future__ import annotations

import logging


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # httpx logs every request's full URL at INFO, query string included, and some clients put keys
    # there; our own per-request line says what matters without it.
    logging.getLogger("httpx").setLevel(logging.WARNING)
