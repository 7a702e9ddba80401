"""What the routes need, built once per app in create_app and found on app.state."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from app.compaction.compactor import Compactor
from app.compaction.inspect import InspectRing
from app.edge.metrics import Metrics
from app.expansion.loop import Expander
from app.policy.keys import Keys
from app.savings.ledger import Ledger
from app.savings.page import Dashboard
from app.server.readiness import Readiness
from app.settings import Settings
from app.upstream.client import Upstream
from app.upstream.models import UpstreamModels


@dataclass(frozen=True)
class Services:
    """Built whole in create_app; the lifespan only starts and stops what runs in the background."""

    settings: Settings
    compactor: Compactor  # with the notes runtime and the prefix tracker it uses
    upstream: Upstream
    upstream_models: UpstreamModels | None  # each model's window and calibration, as learned; None: learn_limits off
    expander: Expander  # answers the expand tool's calls on requests it was offered on
    keys: Keys
    metrics: Metrics
    readiness: Readiness
    ledger: Ledger  # the savings ledger (/savings): what compacted requests saved, per wire format and model
    dashboard: Dashboard  # the savings page (/dashboard)
    inspect: InspectRing | None = None  # the recent requests' diffs, for GET /inspect; None: inspect_requests is 0


def services(connection: HTTPConnection) -> Services:
    """The app's services, for a request or a WebSocket."""
    found: Services = connection.app.state.services
    return found


async def authenticate(connection: HTTPConnection) -> None:
    """Dependency of every route that reaches the upstream or the strategies: /v1/* and /compact, a WebSocket too
    (its handshake is then refused with the error). The key is the Bearer token or Anthropic's x-api-key.
    """
    services(connection).keys.check(connection.headers.get("authorization"), connection.headers.get("x-api-key"))
