"""The web UI's "Rules" page (docs/rules.md; docs/web.md, "Rules").

`/rules`: the built-in rules and the rules the person may see, a form to add
one, and per rule "Switch off"/"Switch on" and "Remove" (its author or an
admin; built-in rules: admins). The same service calls as /api/v1/rules, so
the page can never allow what the API refuses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mailui4agents.services import rules
from mailui4agents.services.principals import Principal
from mailui4agents.state import Transaction
from mailui4agents.web import auth, data
from mailui4agents.web.auth import WebUser, gateway
from mailui4agents.web.row_actions import row_action
from mailui4agents.web.views import _common, _done, _error, _guard, _page, _text

router = APIRouter(include_in_schema=False)


async def _render(
    request: Request, user: WebUser, *, error: str | None = None, status_code: int = 200
) -> Response:
    async with gateway(request).read() as s:
        items = await rules.list_rules(s, user.principal)
    return _page(
        request,
        "rules.html",
        user,
        status_code=status_code,
        builtins=[r for r in items if r.builtin],
        rules=[r for r in items if not r.builtin],
        error=error,
        **(await _common(request, user)),
    )


@router.get("/rules")
async def rules_page(request: Request) -> Response:
    user = await auth.current(request)
    if user is None:
        return auth.to_login(request)
    return await _render(request, user)


def _optional(form: Mapping[str, Any], name: str) -> str | None:
    value = _text(form, name).strip()
    return value or None


@router.post("/rules")
async def add_rule(request: Request) -> Response:
    user, refused, form = await _guard(request)
    if refused is not None:
        return refused
    assert user is not None
    scope = _text(form, "scope")
    try:
        async with gateway(request).write() as s:
            made = await rules.add_rule(
                s,
                user.principal,
                effect=_text(form, "effect"),
                tool_name=_text(form, "tool_name"),
                pattern=_optional(form, "pattern"),
                scope=scope,
                session_id=_optional(form, "session_id") if scope == "session" else None,
                workspace=_optional(form, "workspace") if scope == "workspace" else None,
                reason=_optional(form, "reason"),
            )
    except data.Refusal as err:
        return _error(request, user, err)
    return _done(request, f"/rules#rule-{quote(made.id)}", made)


@router.post("/rules/{rule_id}")
async def rule_action(request: Request, rule_id: str) -> Response:
    async def enable(s: Transaction, who: Principal, _form: Mapping[str, Any]) -> None:
        await rules.set_enabled(s, who, rule_id, enabled=True)

    async def disable(s: Transaction, who: Principal, _form: Mapping[str, Any]) -> None:
        await rules.set_enabled(s, who, rule_id, enabled=False)

    async def remove(s: Transaction, who: Principal, _form: Mapping[str, Any]) -> None:
        await rules.remove_rule(s, who, rule_id)

    actions = {"enable": enable, "disable": disable, "remove": remove}
    return await row_action(request, actions, "/rules")
