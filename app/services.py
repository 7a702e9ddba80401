"""What the routes need, built once per app in create_app and found on app.state."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from .auth import Keys
from .compaction import Compactor
from .metrics import Metrics
from .notes import NotesRuntime
from .prefix_tracking import PrefixTracker
from .readiness import Readiness
from .settings import Settings
from .upstream import Upstream


@dataclass
class Services:
    settings: Settings
    compactor: Compactor
    upstream: Upstream
    keys: Keys
    metrics: Metrics
    readiness: Readiness
    notes: NotesRuntime | None = None  # None until the lifespan has started it
    prefix: PrefixTracker | None = None  # None when prefix_tracking is off


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


async def authenticate(request: Request) -> None:
    """Dependency of every route that reaches the upstream or the strategies: /v1/* and /compact."""
    services(request).keys.check(request.headers.get("authorization"))
