"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Response

from mailui4agents.api.deps import GatewayDep
from mailui4agents.services import health
from mailui4agents.wire.models import HealthOut, ReadyOut

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthOut)
async def healthz() -> HealthOut:
    return HealthOut(status="ok")


@router.get(
    "/readyz",
    response_model=ReadyOut,
    response_model_exclude_unset=True,
    responses={503: {"model": ReadyOut, "description": "Not ready: migrating or unavailable"}},
)
async def readyz(gw: GatewayDep, response: Response) -> ReadyOut:
    out = await health.readiness(gw.db)
    if out.status != "ready":
        response.status_code = 503
    return out
