"""Typed async client for the gateway's REST API and SSE streams.

One client speaks either for an agent (config with a key: ``/api/v1/agent/...``
routes) or for a human (config with a token: the human routes). Every non-2xx
answer becomes an :class:`ApiError` carrying the gateway's code and message.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import AsyncGenerator, Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, NotRequired, TypedDict

from mailui4agents.client.backoff import Backoff
from mailui4agents.client.models import Event, InboxItem, MailOut, Page, SessionOut
from mailui4agents.client.stream import RetryCallback, iter_events
from mailui4agents.client.transport import (
    API,
    Transport,
    as_dict,
    seg,
    without_none,
)
from mailui4agents.wire.deliveries import DeliveryOut
from mailui4agents.wire.models import (
    AgentCreated,
    AgentOut,
    AttachmentRef,
    ContactOut,
    DeciderOut,
    Duplicate,
    GrantOut,
    HeartbeatOut,
    JsonObject,
    KeyRotated,
    OwnerOut,
    ParticipantOut,
    PermissionOut,
    Suggestions,
    TaskerOut,
    TokenOut,
    UserCreated,
    UserOut,
)
from mailui4agents.wire.rules import RuleFileOut, RuleOut
from mailui4agents.wire.work import (
    ReviewCommentOut,
    ReviewSent,
    SessionWorkOut,
    WorkActionOut,
    WorkAskOut,
    WorkOut,
    WorktreesOut,
)

#: The longest long-poll of one get_work_action call (the gateway allows 30 s;
#: the client's read timeout is 30 s).
WORK_WAIT_MAX = 25.0

#: Where a decision came from, when not the API itself (api/permissions.py).
CHANNEL_HEADER = "X-Agentmail-Channel"


class OptionIn(TypedDict):
    """A question's option as an agent offers it (answered as OptionOut)."""

    label: str
    description: NotRequired[str]


class AsyncClient(Transport):
    """Async client; use as ``async with AsyncClient(config) as client: ...``."""

    # -- humans: auth and admin ---------------------------------------------------------

    async def login(self, username: str, password: str) -> str:
        """Exchange a username and password for a human API token."""
        body = {"username": username, "password": password}
        data = await self._call("POST", "/auth/login", json=body, auth=False)
        return str(data["token"])

    async def create_token(self, name: str) -> str:
        """Create a named personal API token; it is shown only this once."""
        return str((await self._call("POST", "/auth/tokens", json={"name": name}))["token"])

    async def list_tokens(self) -> list[TokenOut]:
        """Your usable tokens, newest first; ``current`` marks the token this client uses."""
        return (await self._page("/auth/tokens", {}, TokenOut)).items

    async def revoke_token(self, token_id: str) -> None:
        """Revoke one of your tokens (404 for anyone else's)."""
        await self._call("DELETE", f"/auth/tokens/{seg(token_id)}")

    async def admin_create_user(
        self, username: str, password: str, is_admin: bool = False
    ) -> UserCreated:
        """Create a user (admin only); ``warnings`` name look-alike existing names."""
        body = {"username": username, "password": password, "is_admin": is_admin}
        return UserCreated.model_validate(await self._call("POST", "/admin/users", json=body))

    async def admin_create_agent(
        self,
        name: str,
        workspaces: list[str] | None = None,
        owners: list[str] | None = None,
        taskers: list[str] | None = None,
    ) -> AgentCreated:
        """Create an agent (admin only); its ``key`` is shown once. ``owners``
        (default: you) see and adopt its platform sessions and set it to work,
        as ``taskers`` do; ``workspaces``: its workspace roots (globs)."""
        body: JsonObject = {"name": name}  # the API's AgentCreate
        if workspaces is not None:
            body["workspaces"] = workspaces
        if owners is not None:
            body["owners"] = owners
        if taskers is not None:
            body["taskers"] = taskers
        return AgentCreated.model_validate(await self._call("POST", "/admin/agents", json=body))

    async def agent_taskers(
        self, name: str, *, add: str | None = None, remove: str | None = None
    ) -> list[TaskerOut]:
        """Who may set agent ``name`` to work (its owners and admins ask), after
        adding/removing one."""
        return await self._people(f"/agents/{seg(name)}/taskers", TaskerOut, add, remove)

    async def update_agent(
        self,
        name: str,
        *,
        workspaces: list[str] | None = None,
        max_mode_owners: str | None = None,
        max_mode_taskers: str | None = None,
    ) -> AgentOut:
        """Set agent ``name``'s workspace roots (replaced whole) and mode ceilings."""
        body: JsonObject = {}  # the API's AgentPolicyPatch: only what changes
        if workspaces is not None:
            body["workspaces"] = workspaces
        ceilings = {
            k: v for k, v in (("owners", max_mode_owners), ("taskers", max_mode_taskers)) if v
        }
        if ceilings:
            body["max_mode"] = ceilings
        path = f"/agents/{seg(name)}"
        if not body:
            return AgentOut.model_validate(await self._call("GET", path))
        return AgentOut.model_validate(await self._call("PATCH", path, json=body))

    async def admin_agent_owners(
        self, name: str, *, add: str | None = None, remove: str | None = None
    ) -> list[OwnerOut]:
        """The owners of agent ``name`` (admin only), after adding/removing one."""
        return await self._people(f"/admin/agents/{seg(name)}/owners", OwnerOut, add, remove)

    async def admin_list_users(self) -> list[UserOut]:
        """Every user (admin only, no secrets), all pages."""
        return await self._all("/admin/users", UserOut)

    async def admin_list_agents(self) -> list[AgentOut]:
        """Every agent (admin only, no secrets), all pages."""
        return await self._all("/admin/agents", AgentOut)

    async def admin_rotate_key(self, name: str, grace_s: int = 0) -> KeyRotated:
        """Issue a new key for agent ``name``; the answer holds the key, shown once.
        The agent's other keys stop working now, or after ``grace_s`` seconds."""
        params = {"grace_s": grace_s} if grace_s else None
        path = f"/admin/agents/{seg(name)}/keys"
        return KeyRotated.model_validate(await self._call("POST", path, params=params))

    async def admin_revoke_key(self, name: str, key_id: str) -> None:
        """Revoke one key of agent ``name``."""
        await self._call("DELETE", f"/admin/agents/{seg(name)}/keys/{seg(key_id)}")

    # -- mail -----------------------------------------------------------------------------

    async def send_mail(
        self,
        to: list[str],
        subject: str,
        body: str,
        cc: list[str] | None = None,
        parent_mail_id: str | None = None,
        permission_mode: str | None = None,
        attachment_ids: list[str] | None = None,
        relay: bool | None = None,
        relay_key: str | None = None,
        from_session_id: str | None = None,
        mail_type: str | None = None,
        worktree: bool | None = None,
    ) -> MailOut | Duplicate:
        """Send a mail; returns the MailOut, or Duplicate (``status`` "duplicate_relay").
        ``mail_type="failure"`` (agents) marks a bridge's failure notice, ``"work"``
        a turn's diff (docs/review.md). ``worktree`` (people): the session this mail
        makes runs in a worktree of its own."""
        self._agent_only(
            relay=relay, relay_key=relay_key, from_session_id=from_session_id, mail_type=mail_type
        )
        payload = without_none(
            to=to,
            cc=cc,
            subject=subject,
            body=body,
            parent_mail_id=parent_mail_id,
            permission_mode=permission_mode,
            attachment_ids=attachment_ids,
            relay=relay,
            relay_key=relay_key,
            from_session_id=from_session_id,
            type=mail_type,
            worktree=worktree,
        )
        path = "/agent/mail" if self.config.is_agent else "/mail"
        data = await self._call("POST", path, json=payload)
        if isinstance(data, dict) and data.get("status") == "duplicate_relay":
            return Duplicate.model_validate(data)
        sent = MailOut.model_validate(data)
        if not relay:
            record_sent(sent.id)
        return sent

    async def inbox(
        self,
        status: str = "unread",
        session_id: str | None = None,
        mark_read: bool = False,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[InboxItem]:
        """One page of the agent inbox (oldest first) or the human mailbox (newest first)."""
        if self.config.is_agent:
            params = without_none(status=status, session_id=session_id, mark_read=mark_read)
            params.update(without_none(limit=limit, cursor=cursor))
            return await self._page("/agent/inbox", params, InboxItem)
        if mark_read:
            raise ValueError("mark_read is an agent inbox option; humans mark mail read by reading")
        params = without_none(status=status, session_id=session_id, limit=limit, cursor=cursor)
        return await self._page("/mailbox", params, InboxItem)

    async def mark_read(
        self, session_id: str | None = None, mail_ids: list[str] | None = None
    ) -> int:
        """Mark the agent's mail read (all of a session, or the given ids); returns the count."""
        if not self.config.is_agent:
            raise ValueError("mark_read is an agent endpoint; humans mark mail read by reading")
        body = without_none(session_id=session_id, mail_ids=mail_ids)
        return int((await self._call("POST", "/agent/inbox/read", json=body))["marked"])

    async def read_mail(
        self, mail_id: str, session_id: str | None = None, body_limit: int | None = None
    ) -> MailOut:
        """One mail with its body (``body_limit`` 0 = full; agents only)."""
        if self.config.is_agent:
            params = without_none(session_id=session_id, body_limit=body_limit)
            data = await self._call("GET", f"/agent/mail/{seg(mail_id)}", params=params)
        else:
            self._agent_only(session_id=session_id, body_limit=body_limit)
            data = await self._call("GET", f"/mail/{seg(mail_id)}")
        return MailOut.model_validate(data)

    async def thread(self, mail_id: str, session_id: str | None = None) -> Page[MailOut]:
        """Every mail of the mail's session, oldest first, all pages in one Page."""
        if self.config.is_agent:
            path = f"/agent/mail/{seg(mail_id)}/thread"
            params = without_none(session_id=session_id)
        else:
            self._agent_only(session_id=session_id)
            path, params = f"/mail/{seg(mail_id)}/thread", {}
        items: list[MailOut] = []
        async for page in self._pages(path, params, MailOut):
            items.extend(page.items)
        return Page[MailOut](items=items, next_cursor=None)

    # -- attachments ----------------------------------------------------------------------

    async def upload_attachment(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes,
        name: str | None = None,
        content_type: str | None = None,
    ) -> AttachmentRef:
        """Upload a file (a path, streamed from disk) or bytes; answers its
        AttachmentRef (``attachment_id`` for mails to carry). ``name`` defaults to
        the file's name ("attachment" for bytes); ``content_type`` is guessed from it."""
        path = "/agent/attachments" if self.config.is_agent else "/attachments"
        if isinstance(path_or_bytes, bytes):
            filename = name or "attachment"
            part: tuple[str, Any, str] = (filename, path_or_bytes, _guess(filename, content_type))
            return AttachmentRef.model_validate(
                await self._call("POST", path, files={"file": part})
            )
        source = Path(path_or_bytes)
        filename = name or source.name
        with _open_binary(source) as f:
            part = (filename, f, _guess(filename, content_type))
            return AttachmentRef.model_validate(
                await self._call("POST", path, files={"file": part})
            )

    async def download_attachment(self, attachment_id: str, session_id: str | None = None) -> bytes:
        """The bytes of an attachment (agents: read from ``session_id``'s workspace)."""
        if self.config.is_agent:
            path = f"/agent/attachments/{seg(attachment_id)}"
            params = without_none(session_id=session_id)
        else:
            self._agent_only(session_id=session_id)
            path, params = f"/attachments/{seg(attachment_id)}", {}
        data: bytes = await self._call("GET", path, params=params, raw=True)
        return data

    # -- sessions and heartbeat -----------------------------------------------------------

    async def sessions(
        self,
        status: str | None = None,
        workspace: str | None = None,
        q: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[SessionOut]:
        """One page of the human's sessions."""
        params = without_none(status=status, workspace=workspace, q=q, limit=limit, cursor=cursor)
        return await self._page("/sessions", params, SessionOut)

    async def get_session(self, session_id: str) -> SessionOut:
        """One session."""
        return SessionOut.model_validate(await self._call("GET", f"/sessions/{seg(session_id)}"))

    async def update_session(self, session_id: str, **fields: Any) -> SessionOut:
        """Change ``alias``, ``permission_mode`` or ``archived`` of a session."""
        data = await self._call("PATCH", f"/sessions/{seg(session_id)}", json=fields)
        return SessionOut.model_validate(data)

    async def heartbeat(self, **fields: Any) -> HeartbeatOut:
        """Report the agent's status; ``unknown_fields`` echoes what this gateway ignored."""
        return HeartbeatOut.model_validate(
            await self._call("POST", "/agent/heartbeat", json=fields)
        )

    # -- approvals and questions ----------------------------------------------------------

    async def request_permission(
        self,
        session_id: str,
        relay_key: str,
        *,
        kind: str = "approval",
        tool_name: str | None = None,
        tool_input: JsonObject | None = None,
        summary: str | None = None,
        question: str | None = None,
        options: list[OptionIn] | None = None,
        multi_select: bool | None = None,
        timeout_s: int | None = None,
    ) -> PermissionOut | Duplicate:
        """Agent: open a request. Answers PermissionOut (201) or Duplicate
        (``status`` "duplicate_relay", 200); 409s raise ApiError whose
        ``detail["reason"]`` is ``no_human``, ``mode_allows`` or ``mode_forbids``."""
        body = without_none(
            session_id=session_id,
            kind=kind,
            relay_key=relay_key,
            tool_name=tool_name,
            tool_input=tool_input,
            summary=summary,
            question=question,
            options=options,
            multi_select=multi_select,
            timeout_s=timeout_s,
        )
        data = as_dict(await self._call("POST", "/agent/permissions", json=body))
        if data.get("status") == Duplicate().status:
            return Duplicate.model_validate(data)
        return PermissionOut.model_validate(data)

    async def get_permission(self, request_id: str, wait: float = 0) -> PermissionOut:
        """Agent: one of its requests; with ``wait``, long-poll up to that many seconds."""
        params = {"wait": wait} if wait else None
        path = f"/agent/permissions/{seg(request_id)}"
        return PermissionOut.model_validate(await self._call("GET", path, params=params))

    async def agent_session(self, session_id: str) -> SessionOut:
        """Agent: a session it takes part in (mode, enforcement, alias)."""
        data = await self._call("GET", f"/agent/sessions/{seg(session_id)}")
        return SessionOut.model_validate(data)

    async def interactive_session(
        self, platform_id: str, owner: str, cwd: str, title: str | None = None
    ) -> SessionOut:
        """Agent: the mail session bound to an interactive platform session."""
        body = without_none(platform_id=platform_id, owner=owner, cwd=cwd, title=title)
        data = await self._call("POST", "/agent/sessions/interactive", json=body)
        return SessionOut.model_validate(data)

    async def permissions(
        self, status: str | None = None, session_id: str | None = None, limit: int = 50
    ) -> list[PermissionOut]:
        """Human: requests in the human's sessions (``status`` pending|decided)."""
        params = without_none(status=status, session_id=session_id, limit=limit)
        data = await self._call("GET", "/permissions", params=params)
        return Page[PermissionOut].model_validate(data).items

    async def decide(
        self,
        request_id: str,
        decision: str,
        *,
        note: str | None = None,
        always: bool | None = None,
        grant_pattern: str | None = None,
        answers: list[str] | None = None,
        channel: str | None = None,
    ) -> PermissionOut:
        """Human: approve or deny (``decision`` approve|deny), or answer a question.
        ``channel="cli"`` records the decision as the command line's (header
        ``X-Agentmail-Channel``; docs/remote.md, "First answer wins")."""
        body = without_none(
            decision=decision, note=note, always=always, grant_pattern=grant_pattern,
            answers=answers,
        )  # fmt: skip
        path = f"/permissions/{seg(request_id)}/decision"
        headers = {CHANNEL_HEADER: channel} if channel else None
        data = await self._call("POST", path, json=body, headers=headers)
        return PermissionOut.model_validate(data)

    async def deliveries(self, request_id: str) -> list[DeliveryOut]:
        """Human (decider): what happened to a request on each channel and device."""
        path = f"/permissions/{seg(request_id)}/deliveries"
        return [DeliveryOut.model_validate(item) for item in await self._call("GET", path)]

    async def deciders(
        self, session_id: str, *, add: str | None = None, remove: str | None = None
    ) -> list[DeciderOut]:
        """Human: who decides in a session (owners, named deciders); owners may
        add or remove a decider."""
        path = f"/sessions/{seg(session_id)}/deciders"
        if add is not None:
            await self._call("POST", path, json={"name": add})
        if remove is not None:
            await self._call("DELETE", f"{path}/{seg(remove)}")
        return Page[DeciderOut].model_validate(await self._call("GET", path)).items

    async def grants(self, session_id: str | None = None) -> list[GrantOut]:
        """Human: standing grants of the human's sessions."""
        params = without_none(session_id=session_id)
        data = await self._call("GET", "/grants", params=params)
        return Page[GrantOut].model_validate(data).items

    async def revoke_grant(self, grant_id: str) -> GrantOut:
        """Human: revoke a standing grant."""
        return GrantOut.model_validate(await self._call("DELETE", f"/grants/{seg(grant_id)}"))

    # -- rules (docs/rules.md) ------------------------------------------------------------

    async def rules(
        self, session_id: str | None = None, workspace: str | None = None
    ) -> list[RuleOut]:
        """Human: the rules the person may see, built-in ones first (unfiltered)."""
        params = without_none(session_id=session_id, workspace=workspace)
        return Page[RuleOut].model_validate(await self._call("GET", "/rules", params=params)).items

    async def add_rule(self, **body: Any) -> RuleOut:
        """Human: add a rule (effect, tool_name, pattern, scope, session_id, workspace, reason)."""
        return RuleOut.model_validate(await self._call("POST", "/rules", json=without_none(**body)))

    async def remove_rule(self, rule_id: str) -> RuleOut:
        return RuleOut.model_validate(await self._call("DELETE", f"/rules/{seg(rule_id)}"))

    async def switch_rule(self, rule_id: str, enabled: bool) -> RuleOut:
        data = await self._call("PATCH", f"/rules/{seg(rule_id)}", json={"enabled": enabled})
        return RuleOut.model_validate(data)

    async def accept_rule_file(self, workspace: str, content: str, sha256: str) -> RuleFileOut:
        """Human: accept exactly this content of the workspace's rule file."""
        body = {"workspace": workspace, "content": content, "sha256": sha256}
        return RuleFileOut.model_validate(await self._call("POST", "/rules/files", json=body))

    # -- discovery: forward, participants, contacts, suggestions, search ------------------

    async def forward_mail(
        self,
        mail_id: str,
        to: list[str],
        cc: list[str] | None = None,
        note: str | None = None,
        session_id: str | None = None,
    ) -> MailOut:
        """Quote a mail you may read to new recipients (``note`` first); agents pass
        ``session_id``, the session they work in (their read scope)."""
        self._agent_only(session_id=session_id)
        body = without_none(to=to, cc=cc, note=note, session_id=session_id)
        prefix = "/agent" if self.config.is_agent else ""
        path = f"{prefix}/mail/{seg(mail_id)}/forward"
        sent = MailOut.model_validate(await self._call("POST", path, json=body))
        record_sent(sent.id)
        return sent

    async def participants(
        self, session_id: str, scope_session_id: str | None = None
    ) -> list[ParticipantOut]:
        """Agent: everyone in a session, in order of first appearance;
        ``scope_session_id`` is the session the agent works in (default: that one)."""
        if not self.config.is_agent:
            raise ValueError("participants is an agent endpoint; people see them on the session")
        params = {"session_id": scope_session_id or session_id}
        path = f"/agent/sessions/{seg(session_id)}/participants"
        return (await self._page(path, params, ParticipantOut)).items

    async def contacts(self, session_id: str | None = None) -> list[ContactOut]:
        """Everyone you exchanged mail with, most recent first."""
        self._agent_only(session_id=session_id)
        path = "/agent/contacts" if self.config.is_agent else "/contacts"
        params = without_none(session_id=session_id)
        return (await self._page(path, params, ContactOut)).items

    async def suggest_address(self, q: str, session_id: str | None = None) -> Suggestions:
        """Complete a partial address ``name@path.session``: names, paths, sessions."""
        self._agent_only(session_id=session_id)
        path = "/agent/contacts/suggest" if self.config.is_agent else "/contacts/suggest"
        params = without_none(q=q, session_id=session_id)
        return Suggestions.model_validate(await self._call("GET", path, params=params))

    async def search_mail(
        self,
        q: str,
        session_id: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page[MailOut]:
        """Mail whose subject or body has every word of ``q`` (``word*`` = prefix), newest
        first; each item keeps the gateway's ``snippet`` (``item.model_extra``)."""
        self._agent_only(session_id=session_id)
        path = "/agent/search" if self.config.is_agent else "/search"
        params = without_none(q=q, session_id=session_id, limit=limit, cursor=cursor)
        return await self._page(path, params, MailOut)

    # -- work and review (docs/review.md) -------------------------------------------------

    async def work(self, session_id: str) -> WorkOut:
        """Human: the session's worktree, its last actions and the review comments."""
        return WorkOut.model_validate(await self._call("GET", f"/sessions/{seg(session_id)}/work"))

    async def comment(
        self,
        mail_id: str,
        path: str,
        line: int,
        body: str,
        end_line: int | None = None,
        side: str = "new",
    ) -> ReviewCommentOut:
        """Human: a comment on ``line`` (to ``end_line``) of ``path`` in a work mail's patch."""
        payload = without_none(path=path, line=line, end_line=end_line, side=side, body=body)
        data = await self._call("POST", f"/mails/{seg(mail_id)}/comments", json=payload)
        return ReviewCommentOut.model_validate(data)

    async def delete_comment(self, comment_id: str) -> None:
        """Human: take back one of one's comments not sent yet."""
        await self._call("DELETE", f"/comments/{seg(comment_id)}")

    async def send_review(self, session_id: str) -> ReviewSent:
        """Human: send every pending comment of one's in the session as one mail to the agent."""
        data = await self._call("POST", f"/sessions/{seg(session_id)}/review", json={})
        return ReviewSent.model_validate(data)

    async def work_action(self, session_id: str, action: str) -> WorkActionOut:
        """Human (an owner, or an admin): ``merge``, ``discard``, ``keep`` or ``push``."""
        path = f"/sessions/{seg(session_id)}/work/actions"
        return WorkActionOut.model_validate(await self._call("POST", path, json={"action": action}))

    async def get_work_action(self, action_id: str, wait: float = 0) -> WorkActionOut:
        """Human: an action; with ``wait``, long-poll until it is answered (at most
        25 s a call: under the client's read timeout)."""
        params = {"wait": min(wait, WORK_WAIT_MAX)} if wait else None
        data = await self._call("GET", f"/work/actions/{seg(action_id)}", params=params)
        return WorkActionOut.model_validate(data)

    async def admin_worktrees(self) -> WorktreesOut:
        """Admin: every active worktree and their disk use."""
        return WorktreesOut.model_validate(await self._call("GET", "/admin/worktrees"))

    async def report_work(self, session_id: str, **fields: Any) -> SessionWorkOut:
        """Agent: the worktree of a session it runs in (branch, path, base_branch,
        base_commit, head_commit, bytes, state, dirty, unmerged)."""
        path = f"/agent/sessions/{seg(session_id)}/work"
        return SessionWorkOut.model_validate(await self._call("PUT", path, json=fields))

    async def pending_work_actions(self) -> list[WorkActionOut]:
        """Agent: its actions still waiting for an answer, oldest first."""
        params = {"status": "pending"}
        return (await self._page("/agent/work/actions", params, WorkActionOut)).items

    async def finish_work_action(
        self,
        action_id: str,
        status: str,
        message: str,
        conflicts: Sequence[str] = (),
    ) -> WorkActionOut:
        """Agent: answer an action: ``done``, ``refused`` (with the merge's
        ``conflicts``) or ``failed``."""
        body = {"status": status, "message": message, "conflicts": list(conflicts)}
        data = await self._call("POST", f"/agent/work/actions/{seg(action_id)}", json=body)
        return WorkActionOut.model_validate(data)

    async def ask_about_work(self, session_id: str, reason: str) -> WorkAskOut:
        """Agent: ask the owners to keep or discard a worktree past its retention
        (once per unanswered question: ``deduplicated`` then)."""
        path = f"/agent/sessions/{seg(session_id)}/work/ask"
        return WorkAskOut.model_validate(await self._call("POST", path, json={"reason": reason}))

    # -- live events ----------------------------------------------------------------------

    def events(
        self,
        last_event_id: int | None = None,
        *,
        on_retry: RetryCallback | None = None,
        on_connect: Callable[[], None] | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Live events, forever, reconnecting with backoff; close with ``aclosing``.

        Resumes after ``last_event_id`` when given. ``on_connect`` runs each time the
        gateway accepts the stream: from then on no event can be missed, so a waiter
        posts its request only after the first call (docs/behaviour.md#approval-round-trip (step
        1)).
        Raises :class:`ApiError` on a permanent refusal (401/403), never retried.
        """
        path = f"{API}/agent/events" if self.config.is_agent else f"{API}/events"
        initial, cap = self._reconnect
        return iter_events(
            self._http,
            path,
            headers=self._auth_headers(),
            last_event_id=None if last_event_id is None else str(last_event_id),
            backoff=Backoff(initial=initial, cap=cap),
            on_retry=on_retry,
            on_connect=on_connect,
        )


#: Set by the bridge for one turn: every mail this client sends (not relays) is
#: appended to that file, so the bridge knows the model answered by itself and
#: sends no automatic reply (whichever process of the turn sent it: the MCP
#: server, `agentmail send`, an agent's own script).
SENT_LOG_VAR = "AGENTMAIL_SENT_LOG"


def record_sent(mail_id: str) -> None:
    """Append ``mail_id`` to ``$AGENTMAIL_SENT_LOG`` when the bridge asked for it."""
    target = os.environ.get(SENT_LOG_VAR)
    if not target:
        return
    try:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{mail_id}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # the turn is over (its folder gone): nobody will read it


def _guess(filename: str, content_type: str | None) -> str:
    return content_type or mimetypes.guess_type(filename)[0] or "application/octet-stream"


def _open_binary(path: Path) -> BinaryIO:
    # httpx reads the file in chunks while sending: a large file is never in memory.
    return path.open("rb")
