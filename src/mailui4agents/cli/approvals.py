"""``agentmail permissions | approve | deny | answer | grants | revoke``.

A person decides what agents asked for (docs/behaviour.md#approval-round-trip to
docs/behaviour.md#questions). Every command here needs
a person's token (``agentmail login`` or ``AGENTMAIL_TOKEN``): agents ask, people
decide, so an agent key is refused here before anything is sent.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from mailui4agents.cli.common import echo_json, fail, load_config, run
from mailui4agents.cli.output import one_line
from mailui4agents.client import ApiError, AsyncClient
from mailui4agents.domain.grants import EVERY, PREFIX, GrantRule, covers, new_grant
from mailui4agents.domain.times import parse_rfc3339
from mailui4agents.wire.models import to_json

T = TypeVar("T")

AGENT_KEY_PREFIX = "am_agent_"
NOT_A_PERSON = (
    "this command needs a person's token, but an agent key is set: agents ask, "
    "people decide. Unset AGENTMAIL_KEY and run `agentmail login` (or set AGENTMAIL_TOKEN)."
)
WHAT_WIDTH = 100


# -- pure helpers (no I/O) ----------------------------------------------------------------


def age(created_at: str | None, now: datetime | None = None) -> str:
    """How long ago ``created_at`` (RFC 3339) was, as ``42s``, ``5m``, ``3h`` or ``2d``."""
    if not created_at:
        return "?"
    try:
        moment = parse_rfc3339(created_at)
    except ValueError:
        return "?"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - moment).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _clip(text: str, width: int = WHAT_WIDTH) -> str:
    text = one_line(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def what_is_asked(request: Mapping[str, Any]) -> str:
    """The tool and its command/path, or the question with its options, on one line."""
    if request.get("kind") == "question":
        labels = [str(option.get("label")) for option in request.get("options") or []]
        choice = f" [{' | '.join(labels)}]" if labels else " [free text]"
        multi = " (several)" if labels and request.get("multi_select") else ""
        return _clip(f"question: {request.get('question') or ''}{choice}{multi}")
    tool = str(request.get("tool_name") or "?")
    tool_input = request.get("tool_input") or {}
    target: Any = None
    if isinstance(tool_input, Mapping):
        for key in ("command", "file_path", "notebook_path", "path", "url"):
            if tool_input.get(key):
                target = tool_input[key]
                break
    if target is None:
        target = request.get("summary") or (
            json.dumps(tool_input, ensure_ascii=False, separators=(",", ":")) if tool_input else ""
        )
    return _clip(f"{tool}: {target}" if target else tool)


def permission_line(request: Mapping[str, Any], now: datetime | None = None) -> str:
    """One row of ``agentmail permissions``: id, age, agent, session, what is asked."""
    session = request.get("session_alias") or request.get("session_id") or "?"
    row = (
        f"{request.get('id')}  {age(request.get('created_at'), now):>4}  "
        f"{request.get('agent') or '?'}  {session}  {what_is_asked(request)}"
    )
    status = request.get("status")
    if status and status != "pending":
        by = f" by {request['decided_by']}" if request.get("decided_by") else ""
        row += f"  → {status}{by}"
        if request.get("answers"):
            row += f": {', '.join(str(a) for a in request['answers'])}"
        if request.get("note"):
            row += f" ({one_line(str(request['note']))})"
    return row


def grant_text(grant: Mapping[str, Any]) -> str:
    """What a standing grant allows, in words: the gateway's `covers`, or the
    same words made here from its pattern and scope (an older gateway sends
    neither covers nor scope: a grant without a pattern meant every input)."""
    tool = str(grant.get("tool_name") or "?")
    text = grant.get("covers")
    if not text:
        pattern = grant.get("pattern")
        scope = grant.get("scope") or (EVERY if pattern is None else PREFIX)
        text = covers(GrantRule(tool, pattern, scope))
    out = f"always allow {tool}: {text}"
    if grant.get("legacy_every_input"):
        out += (
            " (an older grant without a pattern, which covers every input: revoke it, "
            "then approve with --always to allow only the approved command)"
        )
    return out


def grant_line(grant: Mapping[str, Any]) -> str:
    """One row of ``agentmail grants``."""
    revoked = "  (revoked)" if grant.get("revoked_at") else ""
    return (
        f"{grant.get('id')}  {grant_text(grant)}  session {grant.get('session_id')}  "
        f"by {grant.get('created_by') or '?'}{revoked}"
    )


def check_answer(request: Mapping[str, Any], options: tuple[str, ...], text: str | None) -> None:
    """Refuse an answer that cannot fit the request (ValueError with the reason).

    Only shape mismatches are caught here, for a clearer message; which labels
    are valid is the gateway's call (it names an unknown option itself).
    """
    request_id = request.get("id")
    if request.get("kind") != "question":
        raise ValueError(
            f"request {request_id} is an approval, not a question: use "
            f"`agentmail approve {request_id}` or `agentmail deny {request_id} --note …`"
        )
    labels = [str(option.get("label")) for option in request.get("options") or []]
    if labels and text is not None:
        raise ValueError(
            f"request {request_id} asks to choose among options ({', '.join(labels)}): "
            "answer with --option LABEL"
        )
    if not labels and options:
        raise ValueError(
            f"request {request_id} is a free-text question without options: answer with --text"
        )


# -- plumbing -----------------------------------------------------------------------------


def run_as_person(action: Callable[[AsyncClient], Awaitable[T]]) -> T:
    """``run`` with the stored/exported credential, refusing an agent key up front."""
    config = load_config()
    if config.is_agent or (config.credential or "").startswith(AGENT_KEY_PREFIX):
        fail(NOT_A_PERSON)
    return run(action, config=config)


async def _find_pending(client: AsyncClient, request_id: str) -> dict[str, Any] | None:
    """The pending request ``request_id`` from the person's list, or None."""
    for request in await client.permissions(status="pending", limit=500):
        if request.id == request_id:
            return to_json(request)
    return None


def delivery_line(item: Mapping[str, Any]) -> str:
    """One row of ``agentmail permissions --show``:
    ``push · Ana's phone · sent 201 in 38 ms · 07:41:02``."""
    where = item.get("device") or item.get("person")
    state = str(item.get("state") or "?")
    if item.get("detail"):
        state += f" {one_line(str(item['detail']))}"
    if item.get("latency_ms") is not None:
        state += f" in {float(item['latency_ms']):g} ms"
    at = str(item.get("at") or "")
    with contextlib.suppress(ValueError):  # not a timestamp: shown as it came
        at = parse_rfc3339(at).astimezone(UTC).strftime("%H:%M:%S")
    parts = [str(item.get("channel") or "?"), *([str(where)] if where else []), state, at]
    return " · ".join(parts)


def _name_the_request(error: ApiError, request_id: str) -> None:
    """A decision that came too late says which request (the gateway's message
    says who decided it, from where, how long ago)."""
    if error.detail.get("reason") != "already_decided" or request_id in error.message:
        return
    rest = error.message.removeprefix("request ")  # "request already decided by …"
    error.message = f"request {request_id} {rest}"


def _hint_for_questions(error: ApiError, request_id: str) -> None:
    """Approving a question fails on its (missing) answers: say what to do instead."""
    if error.field == "answers":
        error.message += f" — to answer a question use `agentmail answer {request_id}`"


# -- commands -----------------------------------------------------------------------------


@click.command("permissions")
@click.option("--all", "show_all", is_flag=True, help="Pending and decided requests.")
@click.option("--decided", is_flag=True, help="Only decided (or expired/cancelled) requests.")
@click.option("--session", "session_id", metavar="ID", help="Only this session.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option(
    "--show",
    "show_id",
    metavar="ID",
    help="One request and what happened to it on each channel and device.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def permissions(
    show_all: bool,
    decided: bool,
    session_id: str | None,
    limit: int,
    show_id: str | None,
    as_json: bool,
) -> None:
    """List what agents asked you: pending requests unless --all or --decided."""
    if show_all and decided:
        raise click.UsageError("give --all or --decided, not both")
    if show_id is not None:
        _show(show_id, as_json)
        return
    status = None if show_all else "decided" if decided else "pending"

    async def fetch(client: AsyncClient) -> list[dict[str, Any]]:
        found = await client.permissions(status=status, session_id=session_id, limit=limit)
        return [to_json(request) for request in found]

    requests = run_as_person(fetch)
    if as_json:
        echo_json(requests)
        return
    if not requests:
        click.echo("No pending requests." if status == "pending" else "No requests.")
        return
    now = datetime.now(UTC)
    for request in requests:
        click.echo(permission_line(request, now))


def _show(request_id: str, as_json: bool) -> None:
    """``permissions --show ID``: the request's line, then one line per delivery."""

    async def fetch(client: AsyncClient) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        # 404/403 unless a decider
        found = [to_json(d) for d in await client.deliveries(request_id)]
        for request in await client.permissions(status=None, limit=500):
            if request.id == request_id:
                return to_json(request), found
        return None, found

    request, found = run_as_person(fetch)
    if as_json:
        echo_json({"request": request, "deliveries": found})
        return
    click.echo(permission_line(request) if request else f"{request_id}  (not among your last 500)")
    if not found:
        click.echo("  no deliveries")
    for item in found:
        click.echo(f"  {delivery_line(item)}")


@click.command("approve")
@click.argument("request_id", metavar="ID")
@click.option("--note", help="A note for the agent.")
@click.option(
    "--always",
    is_flag=True,
    help="Also allow exactly this command (file tools: this path; others: this input) "
    "from now on in this session.",
)
@click.option(
    "--pattern",
    metavar="P",
    help="With --always, allow commands starting with P (shell) or paths under P (files) "
    "instead; '*' allows every input of the tool. Implies --always.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the decided request as JSON.")
def approve(
    request_id: str, note: str | None, always: bool, pattern: str | None, as_json: bool
) -> None:
    """Approve the request ID."""
    standing = always or pattern is not None

    async def decide(client: AsyncClient) -> dict[str, Any]:
        try:
            decided = await client.decide(
                request_id,
                "approve",
                note=note,
                always=standing or None,
                grant_pattern=pattern,
                channel="cli",
            )
            return to_json(decided)
        except ApiError as error:
            _hint_for_questions(error, request_id)
            _name_the_request(error, request_id)
            raise

    decided = run_as_person(decide)
    if as_json:
        echo_json(decided)
        return
    session = decided.get("session_alias") or decided.get("session_id")
    click.echo(f"Approved {request_id} ({what_is_asked(decided)}).")
    if decided.get("grant_id"):
        tool = str(decided.get("tool_name") or "?")
        rule = new_grant(tool, decided.get("tool_input") or {}, pattern)
        granted = {"tool_name": tool, "covers": covers(rule) if rule else None, "pattern": pattern}
        click.echo(
            f"Granted: {grant_text(granted)} in session {session} "
            f"(grant {decided['grant_id']}; undo with `agentmail revoke {decided['grant_id']}`)."
        )


@click.command("deny")
@click.argument("request_id", metavar="ID")
@click.option(
    "--note",
    required=True,
    help="Why (required: a refusal without a reason leaves the agent guessing).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the decided request as JSON.")
def deny(request_id: str, note: str, as_json: bool) -> None:
    """Deny the request ID, telling the agent why."""
    if not note.strip():
        raise click.UsageError("--note must say why: the agent reads it to decide what to do next")

    async def decide(client: AsyncClient) -> dict[str, Any]:
        try:
            return to_json(await client.decide(request_id, "deny", note=note, channel="cli"))
        except ApiError as error:
            _name_the_request(error, request_id)
            raise

    decided = run_as_person(decide)
    if as_json:
        echo_json(decided)
        return
    click.echo(f"Denied {request_id} ({what_is_asked(decided)}): {one_line(note)}")


@click.command("answer")
@click.argument("request_id", metavar="ID")
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="LABEL",
    help="The chosen option; repeat for a multiple-choice question.",
)
@click.option("--text", help="A free-text answer (for a question without options).")
@click.option("--note", help="A note for the agent.")
@click.option("--json", "as_json", is_flag=True, help="Print the answered request as JSON.")
def answer(
    request_id: str, options: tuple[str, ...], text: str | None, note: str | None, as_json: bool
) -> None:
    """Answer the question ID with --option LABEL (repeatable) or --text T."""
    if bool(options) == (text is not None):
        raise click.UsageError("give either --option (one or more) or --text, exactly one of them")
    answers = list(options) if options else [str(text)]

    async def submit(client: AsyncClient) -> dict[str, Any]:
        request = await _find_pending(client, request_id)
        if request is not None:  # else the gateway says why (decided, unknown, not yours)
            check_answer(request, options, text)
        try:
            return to_json(
                await client.decide(
                    request_id, "approve", note=note, answers=answers, channel="cli"
                )
            )
        except ApiError as error:
            _name_the_request(error, request_id)
            raise

    answered = run_as_person(submit)
    if as_json:
        echo_json(answered)
        return
    given = ", ".join(str(a) for a in answered.get("answers") or answers)
    click.echo(f"Answered {request_id}: {one_line(given)}")


@click.command("grants")
@click.option("--session", "session_id", metavar="ID", help="Only this session.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def grants(session_id: str | None, as_json: bool) -> None:
    """List standing grants ("always allow") of your sessions."""

    async def fetch(client: AsyncClient) -> list[dict[str, Any]]:
        return [to_json(grant) for grant in await client.grants(session_id=session_id)]

    found = run_as_person(fetch)
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo("No grants.")
    for grant in found:
        click.echo(grant_line(grant))


@click.command("revoke")
@click.argument("grant_id", metavar="GRANT_ID")
@click.option("--json", "as_json", is_flag=True, help="Print the revoked grant as JSON.")
def revoke(grant_id: str, as_json: bool) -> None:
    """Revoke the standing grant GRANT_ID; later requests ask again."""

    async def drop(client: AsyncClient) -> dict[str, Any]:
        return to_json(await client.revoke_grant(grant_id))

    revoked = run_as_person(drop)
    if as_json:
        echo_json(revoked)
        return
    click.echo(
        f"Revoked grant {grant_id} ({grant_text(revoked)}, session {revoked.get('session_id')})."
    )


@click.command("deciders")
@click.argument("session_id", metavar="SESSION_ID")
@click.option("--add", "add", metavar="USER", help="Let USER decide in this session (owners).")
@click.option("--remove", "remove", metavar="USER", help="Take USER's decider role away (owners).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def deciders(session_id: str, add: str | None, remove: str | None, as_json: bool) -> None:
    """Who may approve, deny and change the mode in a session: its owners (the people
    on its first mail) and the deciders they named. Being cc'd grants nothing."""
    rows = run_as_person(lambda client: client.deciders(session_id, add=add, remove=remove))
    if as_json:
        echo_json(rows)
        return
    for item in rows:
        click.echo(f"{item.name}  {item.role}")
