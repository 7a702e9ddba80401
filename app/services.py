"""What the routes need, built once per app in create_app and found on app.state."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from .auth import Keys
from .compaction import Compactor
from .metrics import Metrics
from .readiness import Readiness
from .settings import Settings
from .upstream import Upstream


@dataclass(frozen=True)
class Services:
    """Built whole in create_app; the lifespan only starts and stops what runs in the background."""

    settings: Settings
    compactor: Compactor  # with the notes runtime and the prefix tracker it uses
    upstream: Upstream
    keys: Keys
    metrics: Metrics
    readiness: Readiness


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


async def authenticate(request: Request) -> None:
    """Dependency of every route that reaches the upstream or the strategies: /v1/* and /compact."""
    services(request).keys.check(request.headers.get("authorization"), request.headers.get("x-api-key"))
