"""A permission request or question e-mailed to its deciders (docs/email.md,
"Request e-mails"): hooked in where the request is pushed
(services/permission_requests.py), in the request's transaction, sent after
commit by the e-mail sender (services/email_send.py).

Who gets it: each decider whose notification policy has e-mail on
(services/notify_policy.py, `email`), at each of their verified addresses. The
push's hold-backs (quiet hours, a visible page, owners first) are not applied:
an e-mail waits in the mailbox rather than waking anyone. Reminders and
escalations are pushed only, for now.

What it says: the subject `[alias-or-workspace] Approval: TOOL from AGENT`
(`Question from AGENT`), the tool input masked as in the web UI
(domain/masking.py, again although the stored input is masked already), plain
text plus a sanitised HTML alternative, in the session's thread
(services/email_message.py, `thread_root`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from mailui4agents.db.tables import PermissionRow, SessionRow
from mailui4agents.services import email_addresses, email_message, email_send, email_tokens


async def queue_request(
    s: AsyncSession, row: PermissionRow, session: SessionRow, deciders: Sequence[str]
) -> int:
    """Queue the request's e-mail to each verified address of the `deciders`
    whose e-mail is on; how many were queued. Nothing is read when this gateway
    sends no e-mail."""
    sender = email_send.configured_sender(s)
    if sender is None or not deciders:
        return 0
    found = await email_addresses.reachable(s, deciders, lambda p: p.email)
    if not found:
        return 0
    base = sender.settings.public_url
    text = email_message.request_text(
        kind=row.kind,
        agent=row.agent_name,
        tool_name=row.tool_name,
        tool_input=row.tool_input,
        summary=row.summary,
        question=row.question,
        options=row.options,
        alias=session.alias,
        workspace=session.workspace,
        link=f"{base.rstrip('/')}/approvals#req-{row.id}" if base else None,
    )
    mail_from = sender.mail_from

    def builder(to: str, personal: email_message.Personal) -> Callable[[str], tuple[str, str]]:
        def build(outbox_id: str) -> tuple[str, str]:
            return email_message.request_mail(
                outbox_id=outbox_id,
                mail_from=mail_from,
                to=to,
                session_id=session.id,
                text=text,
                personal=personal,
            )

        return build

    # One-click links decide approvals only (services/email_links.py): a
    # question's options, several or free text, are answered on the web or by
    # a reply, so a question's copy carries its reply token alone.
    kinds = ("reply", "approve", "deny") if row.kind == "approval" else ("reply",)
    for user_id, username, address_id, address in found:
        tokens = {
            kind: await email_tokens.issue(
                s,
                kind=kind,
                user_id=user_id,
                address_id=address_id,
                request_id=row.id,
                session_id=session.id,
                expires_at=row.expires_at,
            )
            for kind in kinds
        }
        links = f"{base.rstrip('/')}/email/decide/" if base else None
        personal = email_message.Personal(
            reply_to=email_tokens.reply_address(mail_from, tokens["reply"]),
            token_reference=email_tokens.reference(mail_from, tokens["reply"]),
            approve_link=f"{links}{tokens['approve']}" if links and "approve" in tokens else None,
            deny_link=f"{links}{tokens['deny']}" if links and "deny" in tokens else None,
        )
        await email_send.enqueue(
            s,
            kind="request",
            user_id=user_id,
            address_id=address_id,
            to=address,
            request_id=row.id,
            person=username,
            build=builder(address, personal),
        )
    return len(found)
