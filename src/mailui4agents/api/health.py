"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mailui4agents.api.deps import GatewayDep
from mailui4agents.db import migrate

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(gw: GatewayDep) -> JSONResponse:
    try:
        current = await migrate.current_revision(gw.db)
    except Exception as e:  # the database is unreachable: not ready, say why
        return JSONResponse({"status": "unavailable", "error": str(e)}, status_code=503)
    head = migrate.head_revision()
    if current != head:
        return JSONResponse(
            {"status": "migrating", "revision": current, "head": head}, status_code=503
        )
    return JSONResponse({"status": "ready", "revision": current})
