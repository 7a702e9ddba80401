"""GET /strategies: what the X-Compaction-Strategies header accepts, so a client can discover it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.services import services
from app.wire import wire_formats

router = APIRouter()


@router.get("/strategies")
async def strategies(request: Request) -> dict[str, Any]:
    """Every strategy with its summary and its parameters (type, default, description, config_only), the chain used
    when a request names none, and the expand tool the proxy adds where a stub's ref resolves, per wire format in
    its own shape (none when expand_max_rounds is 0).
    """
    svc = services(request)
    tools = {w.name: w.expand.definition for w in wire_formats() if w.expand is not None}
    return {
        "default_chain": svc.compactor.default_chain.spec,
        "strategies": svc.compactor.registry.describe(svc.settings.strategies),
        "expand_tool": tools if svc.settings.expand_max_rounds else {},
    }
