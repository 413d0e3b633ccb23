"""A form's POST that does one named action on one row as the logged-in person
(cancel a calendar entry, remove an address, revoke or rename a device): the
guard (login, CSRF), the action the form names or 400 naming `action`, one write
transaction, then the refusal (page or JSON) or the answer of a POST that worked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from mailui4agents.services.principals import Principal
from mailui4agents.state import Transaction
from mailui4agents.web import data
from mailui4agents.web.auth import gateway
from mailui4agents.web.views import _done, _error, _guard, _text

Act = Callable[[Transaction, Principal, Mapping[str, Any]], Awaitable[object]]


async def row_action(request: Request, actions: Mapping[str, Act], then: str) -> Response:
    """Run the form's `action` (one of `actions`, given the session, the person
    and the form) and answer with `then` (303, or `{"ok": true}` for a fetch)."""
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    try:
        act = actions.get(_text(form, "action"))
        if act is None:
            raise data.ServiceError(400, "invalid_value", "unknown action", field="action")
        async with gateway(request).write() as s:
            await act(s, user.principal, form)
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, then)
