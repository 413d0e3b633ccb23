"""Rules before the human (docs/api.md, "Rules"; docs/rules.md): people list,
add, switch and remove them. Agents get 403 on every route (api/deps.Human)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import Field

from mailui4agents.api.deps import GatewayDep, Human
from mailui4agents.api.pages import page
from mailui4agents.api.validation import Id, StrictBody
from mailui4agents.domain.rules import MAX_PATTERN, MAX_REASON, MAX_TOOL
from mailui4agents.domain.rules_file import MAX_FILE_BYTES
from mailui4agents.services import rules
from mailui4agents.wire.models import Page
from mailui4agents.wire.rules import RuleFileOut, RuleOut

router = APIRouter(prefix="/api/v1", tags=["rules"])


class RuleIn(StrictBody):
    effect: Literal["allow", "deny", "ask"]
    tool_name: str = Field(min_length=1, max_length=MAX_TOOL)
    pattern: str | None = Field(default=None, max_length=MAX_PATTERN)
    scope: Literal["session", "workspace", "global"]
    session_id: Id | None = None
    workspace: str | None = Field(default=None, max_length=1024)
    reason: str | None = Field(default=None, max_length=MAX_REASON)


class RuleSwitchIn(StrictBody):
    enabled: bool


@router.get("/rules", response_model=Page[RuleOut], response_model_exclude_unset=True)
async def list_rules(
    who: Human,
    gw: GatewayDep,
    session_id: str | None = None,
    workspace: str | None = None,
) -> Page[RuleOut]:
    """The built-in rules (unfiltered list only), then the rules the caller may
    see: admins all; others the global ones, their own, those of sessions they
    read and of workspaces they own."""
    async with gw.read() as s:
        items = await rules.list_rules(s, who, session_id=session_id, workspace=workspace)
    return page(items, None)


@router.post("/rules", status_code=201, response_model=RuleOut, response_model_exclude_unset=True)
async def add_rule(body: RuleIn, who: Human, gw: GatewayDep) -> RuleOut:
    async with gw.write() as s:
        return await rules.add_rule(
            s,
            who,
            effect=body.effect,
            tool_name=body.tool_name,
            pattern=body.pattern,
            scope=body.scope,
            session_id=str(body.session_id) if body.session_id is not None else None,
            workspace=body.workspace,
            reason=body.reason,
        )


@router.patch("/rules/{rule_id}", response_model=RuleOut, response_model_exclude_unset=True)
async def switch_rule(rule_id: str, body: RuleSwitchIn, who: Human, gw: GatewayDep) -> RuleOut:
    """Switch a rule on or off: its author or an admin; a built-in rule, admins."""
    async with gw.write() as s:
        return await rules.set_enabled(s, who, rule_id, enabled=body.enabled)


@router.delete("/rules/{rule_id}", response_model=RuleOut, response_model_exclude_unset=True)
async def remove_rule(rule_id: str, who: Human, gw: GatewayDep) -> RuleOut:
    async with gw.write() as s:
        return await rules.remove_rule(s, who, rule_id)


class RuleFileIn(StrictBody):
    workspace: str = Field(min_length=1, max_length=1024)
    content: str = Field(max_length=MAX_FILE_BYTES)
    sha256: str = Field(pattern="^[0-9a-f]{64}$")


@router.post(
    "/rules/files", status_code=201, response_model=RuleFileOut, response_model_exclude_unset=True
)
async def accept_rule_file(body: RuleFileIn, who: Human, gw: GatewayDep) -> RuleFileOut:
    """A workspace owner accepts exactly this content of `.agentmail/rules.toml`
    (docs/rules.md, "The rule file"): `agentmail rules accept WORKSPACE`."""
    async with gw.write() as s:
        return await rules.accept_file(s, who, body.workspace, body.content, body.sha256)


@router.get("/rules/files", response_model=RuleFileOut, response_model_exclude_unset=True)
async def get_rule_file(workspace: str, who: Human, gw: GatewayDep) -> RuleFileOut:
    async with gw.read() as s:
        return await rules.get_file(s, who, workspace)
