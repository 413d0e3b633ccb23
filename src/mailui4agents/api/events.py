"""The SSE routes: an agent's and a person's event stream, with a bearer token.
The stream itself is http/event_stream.py (the web UI's /events uses it too)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from mailui4agents.api.deps import Agent, GatewayDep, Human, bearer_token
from mailui4agents.domain.json_types import JsonObject
from mailui4agents.http.event_stream import UNKNOWN, EventStream, open_stream
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from mailui4agents.wire.models import EventFrame

router = APIRouter(prefix="/api/v1", tags=["events"])


def _open(request: Request, gw: Gateway, who: Principal) -> EventStream:
    """A stream opened with a bearer token, which the `principal` dependency just
    checked: its end is taken from there (no second look-up per stream)."""
    token = bearer_token(request)
    checked = getattr(request.state, "token_until", None)
    until = checked[1] if checked is not None and checked[0] == token else UNKNOWN
    return open_stream(request, gw, who, token, until)


# What a stream carries, for the OpenAPI document: frames whose `data` is one of
# the event models (docs/api.md, "Events (SSE)").
STREAM: dict[int | str, JsonObject] = {
    200: {
        "model": EventFrame,
        "description": "Server-sent events: `id`, `event` (EventType) and `data` (JSON) lines",
    }
}


@router.get("/agent/events", response_class=EventStream, responses=STREAM)
async def agent_events(request: Request, who: Agent, gw: GatewayDep) -> EventStream:
    return _open(request, gw, who)


@router.get("/events", response_class=EventStream, responses=STREAM)
async def human_events(request: Request, who: Human, gw: GatewayDep) -> EventStream:
    return _open(request, gw, who)
