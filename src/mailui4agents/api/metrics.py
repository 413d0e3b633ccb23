"""GET /metrics: this process's Prometheus metrics (docs/metrics.md).

Never open to anonymous callers: an admin's bearer token, or the scrape token
of the `metrics_token` setting (compared in constant time). `metrics_enabled`
false answers 404 as if there were no such route."""

from __future__ import annotations

import hmac

from fastapi import APIRouter, Request, Response
from prometheus_client.exposition import choose_encoder

from mailui4agents.api.deps import admin, bearer_token
from mailui4agents.domain.errors import not_found
from mailui4agents.errors import ApiError
from mailui4agents.services import permissions
from mailui4agents.state import Gateway

router = APIRouter(tags=["operations"])


def _scrape_token_ok(gw: Gateway, token: str) -> bool:
    wanted = gw.settings.metrics_token
    if wanted is None or not token:
        return False
    return hmac.compare_digest(token.encode(), wanted.get_secret_value().strip().encode())


# Not in the OpenAPI document: an operations route in Prometheus' format, not
# part of the JSON API (docs/api.md, "Health", and docs/metrics.md).
@router.get("/metrics", response_class=Response, include_in_schema=False)
async def metrics(request: Request) -> Response:
    gw: Gateway = request.app.state.gateway
    if not gw.settings.metrics_enabled or gw.metrics is None:
        raise not_found("route '/metrics'")
    if not _scrape_token_ok(gw, bearer_token(request)):
        if not bearer_token(request):
            raise ApiError(
                401,
                "unauthorized",
                "missing 'Authorization: Bearer <token>' header: an admin's token or "
                "the scrape token (metrics_token)",
                headers={"WWW-Authenticate": "Bearer"},
            )
        await admin(request)  # 401 unknown token, 403 not an admin
    async with gw.read() as s:
        gw.metrics.pending.set(await permissions.count_pending(s))
    # The text format 0.0.4, or OpenMetrics for a scraper that asks for it.
    encode, media_type = choose_encoder(request.headers.get("accept", ""))
    body = encode(gw.metrics.registry)
    return Response(body, media_type=media_type, headers={"Cache-Control": "no-store"})
