"""The prompt of one mail-driven turn, as a pure function (docs/bridge.md, "Prompt").

It opens with a headline that says which situation the model is in — a new
task, a reply to its own earlier mail (not a new task), backlog after downtime,
a new mail in a continuing session, or a redelivery after an interrupted
attempt — and whether a human or an agent wrote. Then the reply rule (from
:mod:`mailui4agents.bridge.replies`, the same rule the bridge applies), the mode
with the enforcement the runner really has, the mail with its attachments, and
the exact addresses to use.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from mailui4agents.bridge.replies import auto_relay_applies
from mailui4agents.domain.modes import Enforcement, Mode


class Situation(Enum):
    """Why this mail reaches the model now (the headline's first word)."""

    NEW_TASK = "new_task"
    REPLY_TO_OWN = "reply_to_own"
    BACKLOG = "backlog"
    CONTINUING = "continuing"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class Attachment:
    """An attachment as listed on the mail."""

    attachment_id: str
    name: str
    size: int
    content_type: str | None = None


@dataclass(frozen=True)
class PromptMail:
    """The mail the turn is about, as the prompt shows it."""

    mail_id: str
    session_id: str
    session_alias: str | None
    workspace: str
    sender: str
    from_human: bool
    to: tuple[str, ...]
    cc: tuple[str, ...]
    subject: str
    body: str
    created_at: str
    reply_address: str | None
    self_address: str | None
    attachments: tuple[Attachment, ...] = ()
    in_reply_to: str | None = None
    #: The session's own git worktree (docs/review.md): (branch, base branch, repository).
    worktree: tuple[str, str | None, str] | None = None


@dataclass(frozen=True)
class PromptInput:
    """Everything the prompt depends on; nothing else is read."""

    mail: PromptMail
    situation: Situation
    mode: Mode
    enforcement: Enforcement
    agent: str
    #: The session's earlier mails, rendered, for a platform that cannot resume
    #: its own session (DSH over ACP): each turn starts afresh.
    earlier: tuple[str, ...] = ()
    #: The turn runs in the bridge's proven sandbox (docs/sandbox.md).
    sandboxed: bool = False


def sender_kind(mail: PromptMail) -> str:
    """ "a human (ana)" or "another agent (pi)"; a missing from_human counts as agent."""
    return f"a human ({mail.sender})" if mail.from_human else f"another agent ({mail.sender})"


def headline(situation: Situation, mail: PromptMail) -> str:
    """The first line: the situation and who wrote."""
    who = sender_kind(mail)
    if situation is Situation.INTERRUPTED:
        return (
            f"REDELIVERED MAIL from {who}: the previous attempt to handle this mail was "
            "interrupted (the bridge stopped in the middle of the turn). Some of the work may "
            "already be done: check the workspace before repeating anything."
        )
    if situation is Situation.REPLY_TO_OWN:
        return (
            f"REPLY from {who} to a mail you sent earlier. This is not a new task: it answers "
            "your own earlier mail, so continue what you were doing with this answer."
        )
    if situation is Situation.BACKLOG:
        return (
            f"BACKLOG MAIL from {who}: it arrived while this agent was offline and is delivered "
            "now, after the downtime. Its moment may have passed; check before acting on it."
        )
    if situation is Situation.CONTINUING:
        return f"NEW MAIL from {who} in a session you are already working in (it continues)."
    return f"NEW TASK from {who}."


def reply_rule(mail: PromptMail) -> str:
    """What happens with the turn's final text (docs/behaviour.md#replies-relays-budgets-loops)."""
    address = mail.reply_address or mail.sender
    if auto_relay_applies(from_human=mail.from_human, model_sent_mail=False):
        return (
            f"How to answer: your final text of this turn is sent back to {mail.sender} "
            f"automatically, as a reply to {address}. Do not also send it with send_mail "
            "(that would answer twice). If you do send mail yourself during this turn, no "
            "automatic reply is sent."
        )
    return (
        "How to answer: the sender is an agent, so nothing is sent back automatically. "
        f"If you have something of substance to tell it, send it with send_mail to {address}. "
        "Do not send acknowledgements, thanks or confirmations: two agents that answer each "
        "other politely never stop."
    )


_MODE_TEXT: dict[Mode, str] = {
    "plan": (
        "plan (read-only): do not change files and do not run commands that change the "
        "machine; read, think and answer."
    ),
    "workspace": (
        "workspace: each shell command, file write or edit is asked of a human by mail before "
        "it runs, and you wait for the decision. A refusal comes with a reason, often a note "
        "from the human: follow it."
    ),
    "full": "full: you may run commands and change files without asking.",
}

_ENFORCEMENT_TEXT: dict[Enforcement, str] = {
    "native": "Enforcement: native (the platform itself blocks what the mode does not allow).",
    "partial": (
        "Enforcement: partial (the platform blocks what the mode does not allow, with known "
        "gaps: do not assume everything will be blocked; comply yourself)."
    ),
    "advisory": (
        "Enforcement: advisory (nothing technically blocks you: keeping to the mode is up to you)."
    ),
}


_SANDBOXED_TEXT: dict[Mode, str] = {
    "plan": (
        "plan (read-only): do not change files and do not run commands that change the "
        "machine; read, think and answer. A sandbox enforced by the kernel refuses every "
        "write (Read-only file system / Permission denied)."
    ),
    "workspace": (
        "workspace: shell commands, file writes and edits inside the workspace run without "
        "asking; a sandbox enforced by the kernel refuses every write outside it (Read-only "
        "file system / Permission denied): do not try to get around it, ask by mail instead."
    ),
    "full": _MODE_TEXT["full"],
}


def mode_briefing(mode: Mode, enforcement: Enforcement, sandboxed: bool = False) -> str:
    """The mode and the truth about how it is enforced."""
    text = f"Permission mode: {(_SANDBOXED_TEXT if sandboxed else _MODE_TEXT)[mode]}"
    if mode == "full":
        return text
    return f"{text}\n{_ENFORCEMENT_TEXT[enforcement]}"


def render_mail(mail: PromptMail) -> str:
    """The mail as the model reads it: headers, attachments, body."""
    lines = [
        f"Mail id: {mail.mail_id}",
        f"From: {mail.sender} ({'human' if mail.from_human else 'agent'})",
        f"To: {', '.join(mail.to)}",
    ]
    if mail.cc:
        lines.append(f"Cc: {', '.join(mail.cc)}")
    lines += [
        f"Date: {mail.created_at}",
        f"Subject: {mail.subject}",
        f"Session: {mail.session_alias or '(no alias yet)'} (id {mail.session_id})",
        f"Workspace: {mail.workspace}",
    ]
    if mail.worktree is not None:
        branch, base, repo = mail.worktree
        lines.append(
            f"Worktree: this session's own git worktree of {repo}, on branch {branch} "
            f"(from {base or 'a detached HEAD'}). Commit here as you like; what each turn "
            "changes is shown to the people in the thread, and the owners merge or discard it."
        )
    if mail.in_reply_to:
        lines.append(f"In reply to: {mail.in_reply_to}")
    if mail.attachments:
        lines.append("Attachments (fetch with the download_attachment tool):")
        for a in mail.attachments:
            kind = f", {a.content_type}" if a.content_type else ""
            lines.append(f"  - {a.name} ({a.size} bytes{kind}), id {a.attachment_id}")
    else:
        lines.append("Attachments: none")
    lines += ["", mail.body]
    return "\n".join(lines)


def addresses(mail: PromptMail) -> str:
    """The exact addresses to use; never build one yourself."""
    reply = mail.reply_address or "(none given: use read_mail to find it)"
    own = mail.self_address or "(none given)"
    return (
        f"Reply address (use exactly this to write to {mail.sender} in this session): {reply}\n"
        f"Your own address in this session: {own}\n"
        "Never build addresses yourself: a typo silently opens a new session."
    )


def build_prompt(data: PromptInput) -> str:
    """The whole prompt for one turn."""
    mail = data.mail
    parts = [
        headline(data.situation, mail),
        f"You are the agent '{data.agent}', working through the mail gateway.",
        reply_rule(mail),
        mode_briefing(data.mode, data.enforcement, data.sandboxed),
        "----- mail -----\n" + render_mail(mail) + "\n----- end of mail -----",
    ]
    if data.earlier:
        parts.insert(
            -1,
            "----- the thread so far (your platform cannot resume its earlier session, "
            "so this is what came before; the mail above is the newest) -----\n"
            + "\n\n".join(data.earlier)
            + "\n----- end of the thread so far -----",
        )
    parts.append(addresses(mail))
    return "\n\n".join(parts) + "\n"


#: Bounds of the thread-so-far section: the newest mails, each cut, all within a total.
EARLIER_MAILS = 20
EARLIER_CHARS_EACH = 4000
EARLIER_CHARS = 40000


def earlier_mails(thread: list[tuple[str, str, str]]) -> tuple[str, ...]:
    """``(sender, subject, body)`` of the earlier mails, oldest first, rendered
    within the bounds above (the newest kept; a cut says so)."""
    rendered: list[str] = []
    total = 0
    for sender, subject, body in reversed(thread[-EARLIER_MAILS:]):
        text = body if len(body) <= EARLIER_CHARS_EACH else body[:EARLIER_CHARS_EACH] + " [cut]"
        entry = f"From {sender}: {subject}\n{text}"
        if total + len(entry) > EARLIER_CHARS:
            rendered.append(f"[{len(thread) - len(rendered)} earlier mails left out]")
            break
        rendered.append(entry)
        total += len(entry)
    return tuple(reversed(rendered))
