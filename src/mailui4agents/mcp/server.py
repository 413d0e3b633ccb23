"""The ``agentmail mcp`` server: mail tools for models over stdio (docs/behaviour.md#mcp-tools).

Every tool talks to the gateway through :mod:`mailui4agents.client`, as the
agent whose key the server holds. Three rules shape all of them:

- Reads are scoped to the session the agent works in (``AGENTMAIL_SESSION_ID``),
  passed by the server on every call. No tool has a scope parameter, and an
  argument the model (or its platform) adds anyway is ignored, never used.
- Extra arguments a platform injects (one adds ``_ref`` to every call) are
  ignored: the argument models do not forbid extra properties and the published
  schemas never say ``additionalProperties: false``.
- A refusal or failure is an MCP tool error (``isError: true``) carrying the
  gateway's message; it is never returned as success text.
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, ParamSpec

import anyio
from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, WithJsonSchema

from mailui4agents.client import ApiError, GatewayUnreachable, MailOut
from mailui4agents.client.calendar import Calendar
from mailui4agents.domain.times import rfc3339
from mailui4agents.mcp import ask as asking
from mailui4agents.mcp import format as fmt
from mailui4agents.mcp.normalise import normalise_addresses, normalise_ids
from mailui4agents.mcp.runtime import Runtime

log = logging.getLogger("mailui4agents.mcp")

SERVER_NAME = "agentmail"
INLINE_TEXT_LIMIT = 16_000  # a downloaded text file up to this size is shown inline
MAX_LIST = 200

INSTRUCTIONS = """\
Mail between you, people and other agents (MailUI4Agents).
Addresses look like name@path.session. To answer a mail, use the exact reply
address the tools show for it, with parent_mail_id set to the mail's id; never
build an address yourself (a typo opens a new session). Send to name@path.new
to start a new session. ask_human asks the people of your current session a
question and waits for their answer. Reads only ever see your current session's
workspace."""

READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
WRITES = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
)
ASKS = ToolAnnotations(
    readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=True
)

_STRINGS = {"type": "array", "items": {"type": "string"}}
Addresses = Annotated[
    Any,
    WithJsonSchema({"anyOf": [_STRINGS, {"type": "string"}]}),
    Field(description="Addresses (name@path.session), a list or one string separated by commas."),
]
OptionalAddresses = Annotated[
    Any,
    WithJsonSchema({"anyOf": [_STRINGS, {"type": "string"}, {"type": "null"}]}),
    Field(description="Cc addresses, like `to`."),
]
AttachmentIds = Annotated[
    Any,
    WithJsonSchema({"anyOf": [_STRINGS, {"type": "string"}, {"type": "null"}]}),
    Field(description="Ids from upload_attachment: a list, or one string of ids."),
]
Options = Annotated[
    Any,
    WithJsonSchema({"anyOf": [_STRINGS, {"type": "null"}]}),
    Field(description="Answer choices to offer; leave out for a free-text answer."),
]

P = ParamSpec("P")


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], isError=True)


def explain(error: ApiError) -> str:
    """The gateway's message, plus the field it blames and what it accepts."""
    message = error.message
    if error.field and error.field not in message:
        message = f"{error.field}: {message}"
    if error.accepted_fields:
        message += f" (accepted: {', '.join(error.accepted_fields)})"
    if isinstance(error, GatewayUnreachable):
        return message
    if error.status == 401:
        message += " — the agent key was refused; call connect_to_server with a valid key"
    elif error.status is not None:
        message = f"the gateway refused ({error.status} {error.code}): {message}"
    return message


def tool_errors(
    fn: Callable[P, Awaitable[str]],
) -> Callable[P, Awaitable[str | CallToolResult]]:
    """Turn refusals into MCP tool errors with a clean message (isError: true)."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> str | CallToolResult:
        try:
            return await fn(*args, **kwargs)
        except ApiError as error:
            return _error(explain(error))
        except (ToolError, ValueError, OSError) as error:
            return _error(str(error))

    return wrapper


def option_labels(value: Any) -> list[str] | None:
    """Options as labels: a list, a JSON list, or one label per line."""
    if value is None:
        return None
    if isinstance(value, str):
        labels = (
            normalise_addresses(value) if value.lstrip().startswith("[") else value.splitlines()
        )
    elif isinstance(value, list | tuple):
        labels = [str(v) for v in value]
    else:
        raise ValueError(f"options: expected a list of strings, got {value!r:.80}")
    cleaned = [label.strip() for label in labels if label.strip()]
    return list(dict.fromkeys(cleaned)) or None


def build_server(runtime: Runtime) -> FastMCP:
    """The FastMCP server with all fourteen tools bound to ``runtime``."""

    @asynccontextmanager
    async def lifespan(_server: FastMCP) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await runtime.aclose()

    server = FastMCP(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING", lifespan=lifespan)

    def register(annotations: ToolAnnotations) -> Callable[[Callable[..., Awaitable[str]]], Any]:
        def decorator(fn: Callable[..., Awaitable[str]]) -> Any:
            guarded = tool_errors(fn)
            server.add_tool(guarded, annotations=annotations, structured_output=False)
            return guarded

        return decorator

    def scope() -> str | None:
        return runtime.session_id

    # -- mail ---------------------------------------------------------------------------

    @register(WRITES)
    async def send_mail(
        to: Addresses,
        subject: Annotated[str, Field(description="The subject line.")],
        body: Annotated[str, Field(description="The text (markdown).")],
        cc: OptionalAddresses = None,
        parent_mail_id: Annotated[
            str | None, Field(description="The id of the mail you answer (a reply).")
        ] = None,
        attachment_ids: AttachmentIds = None,
    ) -> str:
        """Send a mail. To reply, use the mail's reply address exactly as read_mail shows
        it and set parent_mail_id; send to name@path.new to start a new session."""
        recipients = normalise_addresses(to)
        if not recipients:
            raise ToolError("to: name at least one address")
        sent = await runtime.client().send_mail(
            to=recipients,
            subject=subject,
            body=body,
            cc=normalise_addresses(cc) or None,
            parent_mail_id=parent_mail_id or None,
            attachment_ids=normalise_ids(attachment_ids) or None,
            from_session_id=scope(),
        )
        if not isinstance(sent, MailOut):  # a duplicate relay; not expected without a key
            raise ToolError(f"not sent: the gateway reported {sent!r:.200}")
        return fmt.format_sent(sent)

    @register(WRITES)
    async def schedule_mail(
        to: Addresses,
        subject: Annotated[str, Field(description="The subject line.")],
        body: Annotated[str, Field(description="The text (markdown).")],
        start_at: Annotated[
            str,
            Field(
                description="When: ISO 8601, e.g. 2027-03-29T09:00 (wall-clock time in "
                "`timezone`), or with Z / +02:00."
            ),
        ],
        timezone: Annotated[
            str, Field(description="IANA time zone of start_at, e.g. Europe/Berlin.")
        ] = "UTC",
        rrule: Annotated[
            str | None,
            Field(description='Repeat (RFC 5545 RRULE), e.g. "FREQ=WEEKLY;BYDAY=MO;COUNT=4".'),
        ] = None,
        cc: OptionalAddresses = None,
        attachment_ids: AttachmentIds = None,
    ) -> str:
        """Schedule a mail for later, once or repeating (it counts against your send
        budget when it is sent). Addresses as for send_mail."""
        recipients = normalise_addresses(to)
        if not recipients:
            raise ToolError("to: name at least one address")
        entry = await Calendar(runtime.client()).schedule(
            recipients,
            subject,
            body,
            start_at,
            timezone=timezone or "UTC",
            rrule=rrule or None,
            cc=normalise_addresses(cc) or None,
            attachment_ids=normalise_ids(attachment_ids) or None,
            from_session_id=scope(),
        )
        times = ", ".join(rfc3339(t) for t in entry.upcoming)
        repeat = f" (repeats: {entry.rrule})" if entry.rrule else ""
        return f"scheduled {entry.id}{repeat}; next (UTC): {times}"

    @register(READ_ONLY)
    async def read_inbox(
        status: Annotated[
            Literal["unread", "all"], Field(description="unread (default) or all mail.")
        ] = "unread",
        mark_read: Annotated[
            bool, Field(description="Mark the listed mail read (read_mail always does).")
        ] = False,
        limit: Annotated[int, Field(description="At most this many mails (1-200).")] = 20,
    ) -> str:
        """List mail addressed to you in your current session, oldest first, one line
        each with who sent it, the subject, the reply address and a preview."""
        page = await runtime.client().inbox(
            status=status, session_id=scope(), mark_read=mark_read, limit=_bounded(limit)
        )
        return fmt.format_inbox(
            page.items,
            status=status,
            more=page.next_cursor is not None,
            scope=scope(),
            marked=mark_read,
        )

    @register(READ_ONLY)
    async def read_mail(
        mail_id: Annotated[str, Field(description="The mail's id.")],
        body_limit: Annotated[
            int, Field(description="Cut the body after this many characters; 0 = whole body.")
        ] = 0,
    ) -> str:
        """Read one mail: sender, recipients, subject, session, attachments, the exact
        address to reply to, and the whole body. Marks it read."""
        mail = await runtime.client().read_mail(
            mail_id.strip(), session_id=scope(), body_limit=max(0, body_limit)
        )
        return fmt.format_mail(mail)

    @register(READ_ONLY)
    async def read_thread(
        mail_id: Annotated[str, Field(description="The id of any mail of the thread.")],
    ) -> str:
        """Read the whole thread (every mail of that mail's session), oldest first."""
        page = await runtime.client().thread(mail_id.strip(), session_id=scope())
        return fmt.format_thread(page.items)

    @register(WRITES)
    async def forward_mail(
        mail_id: Annotated[str, Field(description="The id of the mail to forward.")],
        to: Addresses,
        cc: OptionalAddresses = None,
        note: Annotated[str | None, Field(description="A few words above the quoted mail.")] = None,
    ) -> str:
        """Forward a mail you can read, quoted, to new recipients."""
        recipients = normalise_addresses(to)
        if not recipients:
            raise ToolError("to: name at least one address")
        sent = await runtime.client().forward_mail(
            mail_id.strip(),
            to=recipients,
            cc=normalise_addresses(cc) or None,
            note=note or None,
            session_id=scope(),
        )
        return "forwarded: " + fmt.format_sent(sent)

    # -- attachments -----------------------------------------------------------------------

    @register(WRITES)
    async def upload_attachment(
        path: Annotated[
            str, Field(description="A file on this machine (relative to the working directory).")
        ],
        name: Annotated[
            str | None, Field(description="The name recipients see (default: the file's).")
        ] = None,
    ) -> str:
        """Upload a file; pass the returned id in send_mail's attachment_ids."""
        source = await anyio.Path(path).expanduser()
        if not await source.is_file():
            raise ToolError(f"no such file: {await source.absolute()}")
        uploaded = await runtime.client().upload_attachment(Path(source), name=name or None)
        return (
            f"uploaded {uploaded.name} ({fmt.size(uploaded.size)})\n"
            f"attachment_id: {uploaded.attachment_id}\n"
            "send it with send_mail(..., attachment_ids=[the id])"
        )

    @register(WRITES)
    async def download_attachment(
        attachment_id: Annotated[str, Field(description="The attachment's id (from read_mail).")],
        save_to: Annotated[
            str | None,
            Field(description="A file or directory to save to (default: a temporary directory)."),
        ] = None,
    ) -> str:
        """Download an attachment of a mail you can read and save it as a file; short
        text files are also shown."""
        attachment_id = attachment_id.strip()
        data = await runtime.client().download_attachment(attachment_id, session_id=scope())
        target = _download_target(attachment_id, save_to)
        target.parent.mkdir(parents=True, exist_ok=True)
        await anyio.Path(target).write_bytes(data)
        text = f"saved attachment {attachment_id} ({fmt.size(len(data))}) to {target}"
        inline = _as_text(data)
        if inline is not None:
            text += f"\ncontent:\n{inline}"
        return text

    # -- discovery -------------------------------------------------------------------------

    @register(READ_ONLY)
    async def suggest_address(
        partial: Annotated[
            str, Field(description="What you have so far: name, name@path or name@path.alias.")
        ] = "",
    ) -> str:
        """Complete an address: matching names, workspaces and sessions."""
        found = await runtime.client().suggest_address(partial, session_id=scope())
        return fmt.format_suggestions(found, partial)

    @register(READ_ONLY)
    async def list_contacts() -> str:
        """Everyone you exchanged mail with: last address and unread count."""
        return fmt.format_contacts(await runtime.client().contacts(session_id=scope()))

    @register(READ_ONLY)
    async def session_participants(
        session: Annotated[
            str | None,
            Field(description="A session id from read_mail (default: your current session)."),
        ] = None,
    ) -> str:
        """Who takes part in a session: address, roles, how many mails each sent."""
        target = (session or "").strip() or scope()
        if not target:
            raise ToolError(
                "no current session (AGENTMAIL_SESSION_ID is not set): name a session id"
            )
        items = await runtime.client().participants(target, scope_session_id=scope())
        return fmt.format_participants(items, target)

    @register(READ_ONLY)
    async def search_mail(
        query: Annotated[
            str, Field(description="Words to find in subject and body; word* for a prefix.")
        ],
        limit: Annotated[int, Field(description="At most this many results (1-200).")] = 20,
    ) -> str:
        """Full-text search over the mail you can read, newest first."""
        if not query.strip():
            raise ToolError("query: give at least one word")
        page = await runtime.client().search_mail(query, session_id=scope(), limit=_bounded(limit))
        return fmt.format_search([m.model_dump(by_alias=True) for m in page.items], query)

    # -- people and connection -------------------------------------------------------------

    @register(ASKS)
    async def ask_human(
        question: Annotated[str, Field(description="The question, complete in itself.")],
        options: Options = None,
        multi_select: Annotated[
            bool, Field(description="With options: may the human pick several?")
        ] = False,
    ) -> str:
        """Ask the people of your current mail session a question and wait for the
        answer (a few minutes at most). Returns the answer text; a refusal or no
        answer in time is an error that says which."""
        session_id = scope()
        if not session_id:
            raise ToolError(
                "ask_human needs a mail session: AGENTMAIL_SESSION_ID is not set for this "
                "MCP server, so there is nobody to ask"
            )
        if not question.strip():
            raise ToolError("question: the question is empty")
        return await asking.ask(
            runtime.client(),
            session_id=session_id,
            question=question.strip(),
            options=option_labels(options),
            multi_select=multi_select,
            timeout_s=runtime.ask_timeout_s,
        )

    @register(WRITES)
    async def connect_to_server(
        url: Annotated[str, Field(description="The gateway URL, e.g. http://127.0.0.1:8025.")],
        key: Annotated[str, Field(description="The agent key (am_agent_…).")],
    ) -> str:
        """Switch to another gateway or key. The new URL and key are tried first (a
        heartbeat); only if the gateway accepts them are they saved and used."""
        notes = await runtime.connect(url, key)
        lines = [f"connected to {runtime.config.url}"] + [f"- {note}" for note in notes]
        return "\n".join(lines)

    return server


def _bounded(limit: int) -> int:
    return max(1, min(MAX_LIST, limit))


def _download_target(attachment_id: str, save_to: str | None) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in attachment_id) or "attachment"
    if not save_to or not save_to.strip():
        return Path(tempfile.gettempdir()) / "agentmail-attachments" / safe
    target = Path(save_to.strip()).expanduser().absolute()
    if target.is_dir():
        target = target / safe
    if target.exists():
        raise ToolError(f"{target} exists already; choose another path")
    return target


def _as_text(data: bytes) -> str | None:
    if len(data) > INLINE_TEXT_LIMIT or b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


async def serve_stdio(env: Mapping[str, str] | None = None, *, channel: bool = False) -> None:
    """Run the server on stdin/stdout until the client closes the connection.
    ``channel``: also Claude Code's channel protocol (mcp/channel.py)."""
    runtime = Runtime.from_env(env)
    server = build_server(runtime)
    if not channel:
        await server.run_stdio_async()
        return
    from mailui4agents.mcp.channel import Channel

    await Channel(runtime, os.environ if env is None else env).serve(server)
