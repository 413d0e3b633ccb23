"""Workspace alias calls of the client (docs/api.md, "Auth and admin"): the
names an admin gives workspaces for new work by e-mail (docs/email.md).
`agentmail workspace alias` (cli/workspace.py) uses them. Admins only."""

from __future__ import annotations

from mailui4agents.client.client import AsyncClient
from mailui4agents.client.transport import seg
from mailui4agents.wire.email import WorkspaceAliasOut

PATH = "/admin/workspace-aliases"


async def put(client: AsyncClient, alias: str, workspace: str) -> WorkspaceAliasOut:
    """Name `workspace` `alias` (a new alias, or a new workspace for one)."""
    data = await client._call("PUT", f"{PATH}/{seg(alias)}", json={"workspace": workspace})
    return WorkspaceAliasOut.model_validate(data)


async def list_all(client: AsyncClient) -> list[WorkspaceAliasOut]:
    return (await client._page(PATH, {}, WorkspaceAliasOut)).items


async def remove(client: AsyncClient, alias: str) -> None:
    await client._call("DELETE", f"{PATH}/{seg(alias)}")
