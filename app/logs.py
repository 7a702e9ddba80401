"""Logging for the proxy process. Nothing here may ever print a key, a header value or a query string."""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from .request_id import request_id

# Attributes every LogRecord has; anything else on a record came in through `extra=` and is a field.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id, pid, then the record's extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": request_id.get(),
            "pid": record.process,  # which worker, with --workers
        }
        entry.update((k, v) for k, v in record.__dict__.items() if k not in _STANDARD and k not in entry)
        if record.exc_info:
            # Still one line: the traceback is a string field, newlines escaped.
            entry["exc_info"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.request_id = request_id.get() or "-"
        return super().format(record)


class _ProxyHandler(logging.StreamHandler[TextIO]):
    """Marks the handler configure_logging installed, so a second call replaces it instead of adding one."""


def configure_logging(level: str, fmt: str = "json") -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _ProxyHandler)]:
        root.removeHandler(handler)
    handler = _ProxyHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    # httpx logs every request's full URL at INFO, query string included, and some clients put keys
    # there; our own per-request line says what matters without it.
    logging.getLogger("httpx").setLevel(logging.WARNING)
