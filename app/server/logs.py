"""Logging for the proxy process. Nothing here may ever print a key, a header value or a query string."""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from app.edge.request_id import request_id

# Libraries that log request or response headers, values included, at DEBUG: httpcore (every header of every
# upstream request and answer: Authorization, Set-Cookie), hpack and h2 (decoded HTTP/2 headers). httpx logs
# each request's full URL at INFO, query string included, and some clients put keys there; our own per-request
# line says what matters without it.
QUIET_LOGGERS = ("httpx", "httpcore", "hpack", "h2")
# Header names whose values are secrets, wherever a log line might quote them: "name: value" as in a raw head,
# ('name', 'value') or (b'name', b'value') as in a repr, "name": "value" as in JSON, name=value as in a query.
REDACTED_NAMES = ("authorization", "proxy-authorization", "x-api-key", "api-key", "api_key", "cookie", "set-cookie")
REDACTED = "[redacted]"
_SECRET_VALUE = re.compile(
    r"(?i)(?<![\w-])(" + "|".join(map(re.escape, REDACTED_NAMES)) + r")(['\"]?\s*[:=,]\s*(?:b?['\"])?)[^'\"\r\n]*"
)


def redact(text: str) -> str:
    """text with the value of every header named in REDACTED_NAMES replaced by [redacted]."""
    return _SECRET_VALUE.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)


class RedactSecrets(logging.Filter):
    """The last line of defence on the proxy's handler: whatever logger a record comes from (a library at DEBUG,
    a traceback quoting a request), the values of secret headers never reach the output.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


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
            # Still one line: the traceback is a string field, newlines escaped. exc_text: as RedactSecrets left it.
            entry["exc_info"] = record.exc_text or self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        record.request_id = request_id.get() or "-"
        return super().format(record)


class _ProxyHandler(logging.StreamHandler[TextIO]):
    """Marks the handler configure_logging installed, so a second call replaces it instead of adding one."""


def resolved_format(fmt: str, stream: TextIO) -> str:
    """auto: text for a person at a terminal, json for whatever collects the output (a file, a pipe, docker)."""
    if fmt != "auto":
        return fmt
    try:
        return "text" if stream.isatty() else "json"
    except ValueError:  # a closed stream
        return "json"


def configure_logging(level: str, fmt: str = "json") -> None:
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _ProxyHandler)]:
        root.removeHandler(handler)
    handler = _ProxyHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if resolved_format(fmt, sys.stderr) == "json" else TextFormatter())
    handler.addFilter(RedactSecrets())
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
