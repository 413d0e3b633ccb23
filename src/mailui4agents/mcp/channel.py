"""``agentmail mcp --channel``: Claude Code's channel protocol on top of the mail
tools (docs/platforms.md, "Claude Code channels").

The server declares ``experimental["claude/channel"]`` and
``experimental["claude/channel/permission"]``. Claude Code (2.1.197) then, when
its own gates let the channel through:

- shows each ``notifications/claude/channel`` ``{content, meta}`` the server
  sends to the model as ``<channel source="agentmail" KEY="VALUE"…>content</channel>``;
- sends ``notifications/claude/channel/permission_request`` ``{request_id,
  tool_name, description, input_preview}`` while its permission dialog is up,
  and takes ``notifications/claude/channel/permission`` ``{request_id,
  behavior}`` as an answer to that dialog (the first answer wins).

Mail: a person's ``message`` mail to the mail session bound to this Claude Code
session (``CLAUDE_CODE_SESSION_ID``, bound as the interactive hooks bind it:
hooks/gateway.py ``mail_session``) is sent as a channel message, exactly once:
it is claimed with the same conditional mark-read as the Stop/UserPromptSubmit
hooks (hooks/mail_in.py ``claim``), so whichever claims first hands it over.
Mail is only claimed when Claude Code was started with this server named in
``--dangerously-load-development-channels`` (or ``--channels``) and on the
first-party API: otherwise Claude Code drops channel messages, and a claimed
mail would be marked read without the model ever seeing it.

Permissions: each ``permission_request`` asks the session's deciders through
the same path as the ``PermissionRequest`` hook (hooks/race.py
``ask_remotely``), with the same relay key prefix for the same tool call, so
the interactive hooks' withdrawal ("answered in the terminal") closes it too,
and when that hook is installed as well, only the first to claim the dialog
asks (hooks/claims.py).
Only a person's decision (or our policy's: protected paths, plan mode) is sent
back; when nobody answers in time, or the gateway refuses, nothing is sent and
the dialog decides. A deny's note follows as a channel message (the answer has
no field for it). Claude Code does not tell the server when the terminal
answered first: see docs/platforms.md.

Everything is bounded and fails closed: a malformed notification is logged and
ignored; every wait has a deadline; at most MAX_RELAYS asks run at once.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from contextlib import aclosing
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.fastmcp import FastMCP
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCMessage, JSONRPCNotification

from mailui4agents.client.backoff import Backoff
from mailui4agents.hooks import claims, mail_in, race
from mailui4agents.hooks.types import HookDecision, HookSettings, ToolCall
from mailui4agents.mcp.runtime import Runtime

log = logging.getLogger("mailui4agents.mcp.channel")

CHANNEL = "claude/channel"
PERMISSION = "claude/channel/permission"
#: What ``agentmail mcp --channel`` adds to the server's capabilities.
EXPERIMENTAL: dict[str, dict[str, Any]] = {CHANNEL: {}, PERMISSION: {}}

MESSAGE = "notifications/claude/channel"
PERMISSION_REQUEST = "notifications/claude/channel/permission_request"
PERMISSION_ANSWER = "notifications/claude/channel/permission"
INITIALIZED = "notifications/initialized"

#: The platform name of the hooks this channel shares sessions and relay keys with.
PLATFORM = "claude-code"
#: The name Claude Code knows this server by (``agentmail install-mcp`` writes it).
SERVER_NAME = "agentmail"
#: The flags of Claude Code that name the channels of a session.
CHANNEL_FLAGS = ("--dangerously-load-development-channels", "--channels")
#: Claude Code's provider switches: with any of them set it refuses channels.
THIRD_PARTY_VARS = (
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_FOUNDRY",
    "CLAUDE_CODE_USE_ANTHROPIC_AWS",
    "CLAUDE_CODE_USE_MANTLE",
    "CLAUDE_CODE_USE_VERTEX",
)
#: How far up the process tree Claude Code's command line is looked for.
MAX_ANCESTORS = 8

#: Seconds after ``initialized`` before the first mail is claimed: Claude Code
#: registers its channel handler right after connecting; a message sent before
#: that would be dropped.
GRACE_S = 2.0
#: Seconds one binding or one inbox sweep may take.
CALL_S = 10.0
#: At most this many permission asks at once; more are left to the dialog.
MAX_RELAYS = 8
#: Limits of a permission_request's fields (Claude Code sends a 5-letter id and
#: a preview of at most 200 characters).
MAX_ID = 64
MAX_TOOL_NAME = 200
MAX_PREVIEW = 4000
MAX_DESCRIPTION = 4000
#: Meta values are cut at this length.
MAX_META = 300
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

HOW_TO_ANSWER = (
    "This came by mail (agentmail). Answer the sender with the agentmail `send_mail` "
    "tool (in this session, replying to the mail id above)."
)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _ancestors(limit: int = MAX_ANCESTORS) -> list[list[str]]:
    """The command lines of this process's parents (Linux /proc), nearest first."""
    found: list[list[str]] = []
    pid = os.getppid()
    for _ in range(limit):
        if pid <= 1:
            break
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        found.append(argv)
    return found


def names_channel(argv: list[str], name: str = SERVER_NAME) -> bool:
    """Whether a command line starts Claude Code with ``server:NAME`` among its
    channels (``--dangerously-load-development-channels server:NAME`` or
    ``--channels server:NAME``, as separate words, with ``=`` or comma-separated)."""
    wanted = f"server:{name}"
    taking = False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if flag in CHANNEL_FLAGS:
            taking = True
            if not eq:
                continue
            arg = value
        elif arg.startswith("-"):
            taking = False
            continue
        if taking and wanted in (part.strip() for part in arg.replace(",", " ").split()):
            return True
    return False


#: Variables with which Claude Code reads no rollout flags (so its channels stay off).
NO_FLAGS_VARS = (
    "DISABLE_GROWTHBOOK",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "DISABLE_TELEMETRY",
)
#: Claude Code's rollout flag for channels, and where it keeps its last value.
ROLLOUT_FLAG = "tengu_harbor"


def claude_config_file(env: Mapping[str, str]) -> str:
    """Claude Code's global config file: ``$CLAUDE_CONFIG_DIR/.claude.json``, else
    ``~/.claude.json``."""
    folder = env.get("CLAUDE_CONFIG_DIR") or env.get("HOME") or os.path.expanduser("~")
    return os.path.join(folder, ".claude.json")


def rollout_cached(env: Mapping[str, str]) -> bool:
    """Whether Claude Code's cached rollout flag for channels is on (its config
    file's ``cachedGrowthBookFeatures``, which Claude Code itself reads at start-up
    and refreshes from Anthropic's servers). Unreadable counts as off."""
    try:
        with open(claude_config_file(env), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return False
    cached = config.get("cachedGrowthBookFeatures") if isinstance(config, dict) else None
    return isinstance(cached, dict) and cached.get(ROLLOUT_FLAG) is True


def mail_gate(env: Mapping[str, str], ancestors: list[list[str]] | None = None) -> str | None:
    """Why mail must not be claimed for the channel, or None when Claude Code
    will take channel messages as far as this server can tell: started with this
    server named as a channel, on the first-party API, reading its rollout flags,
    with the channel flag on. (Claude Code never says whether it registered the
    channel; a mail claimed for a channel it ignores would be marked read unseen.)"""
    for var in THIRD_PARTY_VARS:
        if _truthy(env.get(var)):
            return f"{var} is set: Claude Code takes no channel messages from third-party providers"
    for var in NO_FLAGS_VARS:
        if env.get(var):
            return f"{var} is set: Claude Code reads no rollout flags, so its channels are off"
    if _truthy(env.get("DO_NOT_TRACK")):
        return "DO_NOT_TRACK is set: Claude Code reads no rollout flags, so its channels are off"
    lines = _ancestors() if ancestors is None else ancestors
    if not any(names_channel(argv) for argv in lines):
        return (
            f"Claude Code was not started with --dangerously-load-development-channels "
            f"server:{SERVER_NAME}"
        )
    if not rollout_cached(env):
        return (
            f"Claude Code's rollout flag for channels ({ROLLOUT_FLAG}) is not on in "
            f"{claude_config_file(env)}: Claude Code would ignore the channel's messages"
        )
    return None


def _meta(values: Mapping[str, Any]) -> dict[str, str]:
    """Meta for a channel message: string values, cut, only the keys Claude Code keeps."""
    meta = {}
    for key, value in values.items():
        if value is None or not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", key):
            continue
        text = str(value)
        meta[key] = text if len(text) <= MAX_META else text[: MAX_META - 1] + "…"
    return meta


def mail_message(mail: Mapping[str, Any]) -> dict[str, Any]:
    """The channel message of one claimed mail."""
    return {
        "content": f"{mail_in.render(mail)}\n\n{HOW_TO_ANSWER}",
        "meta": _meta(
            {
                "from": mail.get("from"),
                "mail_id": mail.get("id"),
                "subject": mail.get("subject"),
                "session_id": mail.get("session_id"),
            }
        ),
    }


class BadNotification(ValueError):
    """A channel notification this server does not take (logged, ignored)."""


def parse_permission_request(params: Any) -> tuple[str, str, str, str]:
    """(request_id, tool_name, description, input_preview), or BadNotification."""
    if not isinstance(params, Mapping):
        raise BadNotification("params is not an object")
    values = []
    for name, limit in (
        ("request_id", MAX_ID),
        ("tool_name", MAX_TOOL_NAME),
        ("description", MAX_DESCRIPTION),
        ("input_preview", MAX_PREVIEW),
    ):
        value = params.get(name, "" if name == "description" else None)
        if not isinstance(value, str):
            raise BadNotification(f"{name} is not a string")
        if len(value) > limit:
            raise BadNotification(f"{name} is longer than {limit} characters")
        values.append(value)
    request_id, tool_name, description, preview = values
    if not _ID.match(request_id):
        raise BadNotification(f"request_id {request_id!r:.80} is not an id")
    if not tool_name.strip():
        raise BadNotification("tool_name is empty")
    return request_id, tool_name, description, preview


def preview_input(preview: str) -> dict[str, Any]:
    """The tool input from Claude Code's preview: the JSON itself when it is
    whole (then the relay key prefix is the PermissionRequest hook's), else the
    preview as text (Claude Code cuts it at 200 characters)."""
    try:
        value = json.loads(preview)
    except ValueError:
        return {"input_preview": preview}
    return value if isinstance(value, dict) else {"input_preview": preview}


def answer_for(decision: HookDecision) -> str | None:
    """The channel's answer to the dialog: allow, deny, or None (the dialog decides:
    nobody answered remotely, the gateway refused, or the request was closed
    without a person's decision, e.g. withdrawn as answered in the terminal)."""
    if decision.verdict == "allow":
        return "allow"
    if decision.verdict == "deny" and not decision.reason.startswith(
        ("cancelled", "timed out", "duplicate")
    ):
        return "deny"
    return None


class Channel:
    """The channel half of one ``agentmail mcp --channel`` process."""

    def __init__(self, runtime: Runtime, env: Mapping[str, str]) -> None:
        self.runtime = runtime
        # As the interactive hooks run (AGENTMAIL_INTERACTIVE=1): the owner
        # defaults to the person who ran `agentmail login` on this machine.
        self.env = {**env, "AGENTMAIL_INTERACTIVE": "1"}
        self.platform_session = env.get("CLAUDE_CODE_SESSION_ID") or None
        self.cwd = env.get("CLAUDE_PROJECT_DIR") or os.getcwd()
        self.initialized = anyio.Event()
        self._write: MemoryObjectSendStream[SessionMessage] | None = None
        self._tasks: TaskGroup | None = None
        self._relays: set[str] = set()
        self.session_id: str | None = None

    # -- settings --------------------------------------------------------------------------

    def settings(self) -> HookSettings:
        return HookSettings.from_env(PLATFORM, 600.0, self.call(), self.env)

    def call(self, tool_name: str = "", tool_input: dict[str, Any] | None = None) -> ToolCall:
        return ToolCall(tool_name, tool_input or {}, self.platform_session, self.cwd, None)

    # -- the wire --------------------------------------------------------------------------

    async def notify(self, method: str, params: dict[str, Any]) -> bool:
        """Send one notification to Claude Code; False when the connection is gone."""
        if self._write is None:
            return False
        note = JSONRPCNotification(jsonrpc="2.0", method=method, params=params)
        try:
            await self._write.send(SessionMessage(JSONRPCMessage(note)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    def received(self, method: str, params: Any) -> None:
        """A ``notifications/claude/channel…`` notification from Claude Code."""
        if method != PERMISSION_REQUEST:
            log.warning("ignored a %s notification: not one this server takes", method[:120])
            return
        try:
            request = parse_permission_request(params)
        except BadNotification as exc:
            log.warning("ignored a malformed permission_request: %s", exc)
            return
        request_id = request[0]
        if request_id in self._relays:
            log.warning("ignored a second permission_request %s", request_id)
            return
        if len(self._relays) >= MAX_RELAYS:
            log.warning(
                "ignored permission_request %s: %d asks already run; the dialog decides",
                request_id,
                MAX_RELAYS,
            )
            return
        if self._tasks is None:
            return
        self._relays.add(request_id)
        self._tasks.start_soon(self._relay, *request)

    async def pump(
        self,
        read: MemoryObjectReceiveStream[SessionMessage | Exception],
        out: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Pass Claude Code's messages to the MCP session, all but the channel's."""
        async with out:
            async for message in read:
                if isinstance(message, SessionMessage):
                    root = message.message.root
                    if isinstance(root, JSONRPCNotification):
                        if root.method.startswith(MESSAGE):
                            self.received(root.method, root.params)
                            continue
                        if root.method == INITIALIZED:
                            self.initialized.set()
                await out.send(message)

    # -- permissions -----------------------------------------------------------------------

    async def _relay(self, request_id: str, tool_name: str, description: str, preview: str) -> None:
        try:
            answer, decision = await self._ask(tool_name, description, preview)
        except Exception as exc:  # never crash the server: the dialog decides
            log.warning("permission_request %s: asking failed: %r", request_id, exc)
            return
        finally:
            self._relays.discard(request_id)
        if answer is None:
            log.info("permission_request %s: %s; the dialog decides", request_id, decision.reason)
            return
        await self.notify(PERMISSION_ANSWER, {"request_id": request_id, "behavior": answer})
        if answer == "deny":
            # The answer has no note: the model learns why from a message.
            await self.notify(
                MESSAGE,
                {
                    "content": f"Your use of {tool_name} was refused: {decision.reason}",
                    "meta": _meta(
                        {
                            "kind": "permission_denied",
                            "request_id": request_id,
                            "tool_name": tool_name,
                        }
                    ),
                },
            )

    async def _ask(
        self, tool_name: str, description: str, preview: str
    ) -> tuple[str | None, HookDecision]:
        from mailui4agents.hooks.core import precheck
        from mailui4agents.hooks.gateway import connect
        from mailui4agents.hooks.types import ask

        call = self.call(tool_name, preview_input(preview))
        settings = self.settings()
        decided = precheck(call, settings)
        if decided is not None:
            return answer_for(decided), decided
        if not self.platform_session:
            decided = ask("CLAUDE_CODE_SESSION_ID is not set: no session to ask in")
            return None, decided
        prefix = race.relay_key_prefix(PLATFORM, self.platform_session, tool_name, call.tool_input)
        try:
            claim = claims.take(settings.env, prefix, settings.timeout_s + race.CLAIM_MARGIN_S)
        except OSError as exc:
            log.warning("no dialog claim (%s); asking anyway", exc)
            claim = ""
        if claim is None:
            return None, ask("the PermissionRequest hook asks about this dialog")
        gateway = connect(settings)
        finished = False
        try:
            decision = await anyio.to_thread.run_sync(
                race.ask_remotely, call, settings, gateway, prefix, abandon_on_cancel=True
            )
            finished = True
        finally:
            gateway.abort()  # a no-op once it returned; else the wait ends now
            if not finished:
                # Claude Code went away while a person was asked: nobody waits
                # for this request any more.
                with anyio.CancelScope(shield=True), anyio.move_on_after(race.WITHDRAW_S + 1):
                    await anyio.to_thread.run_sync(race.withdraw, settings, prefix)
            if claim:
                claims.release(claim)
        return answer_for(decision), decision

    # -- mail ------------------------------------------------------------------------------

    async def _bind(self) -> str | None:
        """The bound mail session, retried with backoff while the gateway fails."""
        from mailui4agents.client import ApiError, lite
        from mailui4agents.hooks.gateway import connect, mail_session

        backoff = Backoff(initial=1.0, cap=30.0)
        while True:
            settings = self.settings()
            if not settings.coordinates.is_agent or settings.owner is None:
                log.warning(
                    "no agent key or no owner (AGENTMAIL_OWNER, or `agentmail login` on this "
                    "machine): mail is not delivered through the channel"
                )
                return None
            gateway = connect(settings)
            try:
                until = lite.clock() + CALL_S
                return await anyio.to_thread.run_sync(
                    mail_session, gateway, self.call(), settings, until, abandon_on_cancel=True
                )
            except (ApiError, TimeoutError) as exc:
                if isinstance(exc, ApiError) and exc.permanent:
                    log.warning("cannot bind the mail session: %s", exc)
                    return None
                delay = backoff.next_delay()
                log.warning("cannot bind the mail session (%s); again in %.1f s", exc, delay)
            finally:
                gateway.abort()
            await anyio.sleep(delay)

    async def _sweep(self, session_id: str) -> int:
        """Claim and send the session's unread mail; how many were claimed."""
        from mailui4agents.client import ApiError, lite
        from mailui4agents.hooks.gateway import connect

        gateway = connect(self.settings())
        try:
            mails = await anyio.to_thread.run_sync(
                mail_in.claim, gateway, session_id, lite.clock() + CALL_S, abandon_on_cancel=True
            )
        except (ApiError, TimeoutError) as exc:
            log.warning("cannot read the inbox: %s", exc)
            return 0
        finally:
            gateway.abort()
        for mail in mails:
            if not await self.notify(MESSAGE, mail_message(mail)):
                log.warning("mail %s was claimed but the connection is gone", mail.get("id"))
        return len(mails)

    async def mail(self) -> None:
        """Deliver the session's mail as channel messages, as it arrives."""
        why_not = mail_gate(self.env)
        if why_not is not None:
            log.warning("%s: mail is left to the hooks and tools, not sent as channel messages",
                        why_not)  # fmt: skip
            return
        if not self.platform_session:
            log.warning("CLAUDE_CODE_SESSION_ID is not set: no session to deliver mail from")
            return
        await self.initialized.wait()
        await anyio.sleep(GRACE_S)
        session_id = await self._bind()
        if session_id is None:
            return
        self.session_id = session_id
        wake = anyio.Event()

        def poke() -> None:
            wake.set()

        async def sweeper() -> None:
            nonlocal wake
            while True:
                await wake.wait()
                wake = anyio.Event()
                if await self._sweep(session_id) >= mail_in.MAX_MAILS:
                    wake.set()  # there may be more

        from mailui4agents.wire.events import EventType

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sweeper)
            # Each (re)connection sweeps: nothing committed before it is missed.
            events = self.runtime.client().events(on_connect=poke)
            async with aclosing(events) as stream:
                async for event in stream:
                    data = event.data if isinstance(event.data, Mapping) else {}
                    if event.type == EventType.RESET or (
                        event.type == EventType.NEW_MAIL
                        and data.get("session_id") in (None, session_id)
                    ):
                        poke()

    # -- running ---------------------------------------------------------------------------

    async def serve(self, server: FastMCP) -> None:
        """Run ``server`` over stdio with the channel's capabilities and messages."""
        low = server._mcp_server
        options = low.create_initialization_options(experimental_capabilities=EXPERIMENTAL)
        async with stdio_server() as (read, write):
            inner_send, inner_read = anyio.create_memory_object_stream[SessionMessage | Exception](
                0
            )
            self._write = write.clone()
            try:
                async with anyio.create_task_group() as tasks:
                    self._tasks = tasks
                    tasks.start_soon(self.pump, read, inner_send)
                    tasks.start_soon(self._mail_guarded)
                    await low.run(inner_read, write, options)
                    tasks.cancel_scope.cancel()
            finally:
                await self._write.aclose()

    async def _mail_guarded(self) -> None:
        try:
            await self.mail()
        except Exception as exc:  # never crash the server: the hooks and tools still work
            log.warning("channel mail stopped: %r", exc)
