"""GET /strategies: what the X-Compaction-Strategies header accepts, so a client can discover it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.services import services

router = APIRouter()


@router.get("/strategies")
async def strategies(request: Request) -> dict[str, Any]:
    """Every strategy with its summary and its parameters (type, default, description, config_only), and the
    chain used when a request names none.
    """
    svc = services(request)
    return {
        "default_chain": svc.compactor.default_chain.spec,
        "strategies": svc.compactor.registry.describe(svc.settings.strategies),
    }
