"""What the routes need, built once per app in create_app and found on app.state."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from .compaction import Compactor
from .settings import Settings
from .upstream import Upstream


@dataclass
class Services:
    settings: Settings
    compactor: Compactor
    upstream: Upstream


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found
