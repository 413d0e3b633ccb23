"""An admin's changes to a user (docs/api.md, "Auth and admin"): make or revoke
an admin, reset a password. `agentmail user admin` and `agentmail user password`
(cli/admin.py) use them."""

from __future__ import annotations

from mailui4agents.client.client import AsyncClient
from mailui4agents.client.transport import seg
from mailui4agents.wire.models import UserOut


async def set_admin(client: AsyncClient, username: str, is_admin: bool) -> UserOut:
    """Make `username` an admin (`is_admin`) or take it back (the last admin: 409)."""
    data = await client._call("PATCH", f"/admin/users/{seg(username)}", json={"is_admin": is_admin})
    return UserOut.model_validate(data)


async def reset_password(client: AsyncClient, username: str, password: str) -> UserOut:
    """A new password for `username`; its logins and API tokens end."""
    data = await client._call(
        "PUT", f"/admin/users/{seg(username)}/password", json={"password": password}
    )
    return UserOut.model_validate(data)
