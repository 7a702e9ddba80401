"""Capture every log line the proxy's process writes, formatted as the proxy formats them."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from app.server.logs import QUIET_LOGGERS, JsonFormatter, configure_logging

# uvicorn's loggers do not propagate to the root logger under uvicorn's default logging config (which
# LoopbackServer uses), so they get the capturing handler of their own.
UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")


class _Lines(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(level=1)
        self.lines = lines
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextmanager
def captured_logs() -> Iterator[list[str]]:
    """The proxy's logging as the CLI configures it at debug level (uvicorn's down to its TRACE level), with
    every line also collected as JSON. Restores the logging configuration afterwards.
    """
    names = ["", *QUIET_LOGGERS, *UVICORN]
    saved = {name: (logging.getLogger(name).level, list(logging.getLogger(name).handlers)) for name in names}
    lines: list[str] = []
    handler = _Lines(lines)
    try:
        configure_logging("debug")
        for name in ("", "uvicorn"):
            logging.getLogger(name).addHandler(handler)
        for name in UVICORN:
            logging.getLogger(name).setLevel(1)
        yield lines
    finally:
        for name, (level, handlers) in saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(level)
            logger.handlers[:] = handlers


def parsed(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]
