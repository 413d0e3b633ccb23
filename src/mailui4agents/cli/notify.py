"""``agentmail notify``: your notifications (docs/remote.md, "Push").

A click group so that each notification command is a subcommand of it:
``agentmail notify test`` here; others (``notify settings``) are added beside it
with ``@notify.command(...)``.
"""

from __future__ import annotations

from typing import Any

import click

from mailui4agents.cli.common import echo_json, fail, people_only, run
from mailui4agents.client import AsyncClient
from mailui4agents.client.notify import NotifyPolicy
from mailui4agents.wire.notify import NotifyPolicyOut
from mailui4agents.wire.push import PushTestOut, PushTestResult


@click.group("notify")
def notify() -> None:
    """Your notifications: test push to your devices, your notification settings."""


def describe(item: PushTestResult) -> str:
    """One line per device: its name, then what its push service said."""
    if item.status_code is not None and 200 <= item.status_code < 300:
        took = f" in {item.latency_ms:.0f} ms" if item.latency_ms is not None else ""
        return f"{item.device_name}: sent, push service answered {item.status_code}{took}"
    code = f" ({item.status_code})" if item.status_code is not None else ""
    return f"{item.device_name}: NOT sent{code}: {item.detail}"


@notify.command("test")
@click.option("--json", "as_json", is_flag=True, help="Print each device's result as JSON.")
def test(as_json: bool) -> None:
    """Send a test push to each of your devices that has notifications on, and
    print what each push service answered (waits up to 15 s). Exits 1 if any
    push failed or there is no device to push to."""
    people_only("notify")

    async def act(client: AsyncClient) -> PushTestOut:
        data = await client._call("POST", "/push/test")
        return PushTestOut.model_validate(data)

    out = run(act)
    if as_json:
        echo_json(out.items)
    else:
        for item in out.items:
            click.echo(describe(item))
    if not out.items:
        fail(
            "no device of yours has push notifications on: open the web UI on your "
            "phone (`agentmail pair`), then Devices → Turn on notifications"
        )
    if any(i.status_code is None or not 200 <= i.status_code < 300 for i in out.items):
        raise SystemExit(1)


# --- notify settings (docs/remote.md, "Notification policy") -------------------------

ON_OFF = click.Choice(["on", "off"])
_UNSET = object()  # an option not given: that setting stays as it is


def _minutes_or_off(ctx: click.Context, param: click.Parameter, value: str | None) -> object:
    """MIN (a whole number; the gateway checks 1-1440) or "off" (None), or unset."""
    if value is None:
        return _UNSET
    if value == "off":
        return None
    if value.isascii() and value.isdigit() and len(value) <= 5:
        return int(value)
    raise click.BadParameter(f"{value!r}: minutes (1-1440) or off", ctx, param)


def _hour_or_off(ctx: click.Context, param: click.Parameter, value: str | None) -> object:
    """N (a whole number; the gateway checks 0-23) or "off" (None), or unset."""
    if value is None:
        return _UNSET
    if value == "off":
        return None
    if value.isascii() and value.isdigit() and len(value) <= 2:
        return int(value)
    raise click.BadParameter(f"{value!r}: an hour (0-23) or off", ctx, param)


def _quiet(ctx: click.Context, param: click.Parameter, value: str | None) -> object:
    """HH:MM-HH:MM -> (start, end); "off" -> (None, None); the gateway checks the times."""
    if value is None:
        return _UNSET
    if value == "off":
        return (None, None)
    start, sep, end = value.partition("-")
    if not sep or not start or not end:
        raise click.BadParameter(f"{value!r}: HH:MM-HH:MM (e.g. 22:00-07:00) or off", ctx, param)
    return (start.strip(), end.strip())


def show_policy(p: NotifyPolicyOut) -> list[str]:
    """The policy in words, one setting a line."""
    quiet = f"{p.quiet_start}-{p.quiet_end} ({p.timezone})" if p.quiet_start else "off"
    return [
        f"push: {'on' if p.push else 'off'}",
        f"email: {'on' if p.email else 'off'}",
        f"email of agents' mails: {'on' if p.email_mail else 'off'}",
        f"push content: {p.push_content}",
        f"when a page is visible: {'skip' if p.skip_when_visible else 'push'}",
        f"quiet hours: {quiet}",
        f"time zone: {p.timezone}",
        f"remind after: {f'{p.remind_after_min} min' if p.remind_after_min else 'off'}",
        f"escalate after: {f'{p.escalate_after_min} min' if p.escalate_after_min else 'off'}",
        "daily digest: "
        + (
            f"{p.email_digest_hour}:00 ({p.timezone})" if p.email_digest_hour is not None else "off"
        ),
    ]


@notify.command("settings")
@click.option("--push", type=ON_OFF, help="Push notifications to your devices.")
@click.option("--email", type=ON_OFF, help="Request e-mails.")
@click.option("--email-mail", type=ON_OFF, help="An e-mail of each agent's mail to you.")
@click.option(
    "--content",
    type=click.Choice(["preview", "none"]),
    help="What a push shows: the tool and its input (preview), or only that a request waits.",
)
@click.option(
    "--when-visible",
    type=click.Choice(["skip", "push"]),
    help="While one of your pages is open: no push (skip), or push anyway.",
)
@click.option(
    "--quiet",
    metavar="HH:MM-HH:MM|off",
    callback=_quiet,
    help="Quiet hours in your time zone (may cross midnight: 22:00-07:00).",
)
@click.option("--timezone", metavar="ZONE", help="Your IANA time zone (Europe/Madrid).")
@click.option(
    "--remind-after",
    metavar="MIN|off",
    callback=_minutes_or_off,
    help="One reminder after MIN minutes unanswered.",
)
@click.option(
    "--escalate-after",
    metavar="MIN|off",
    callback=_minutes_or_off,
    help="In sessions you own, push the other deciders only after MIN minutes unanswered.",
)
@click.option(
    "--digest-hour",
    metavar="N|off",
    callback=_hour_or_off,
    help="A daily digest e-mail at hour N (0-23) of your time zone.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the policy as JSON.")
def settings(
    push: str | None,
    email: str | None,
    email_mail: str | None,
    content: str | None,
    when_visible: str | None,
    quiet: object,
    timezone: str | None,
    remind_after: object,
    escalate_after: object,
    digest_hour: object,
    as_json: bool,
) -> None:
    """Print your notification policy; with options, change those settings
    (the others stay) and print the result. docs/remote.md, "Notification policy"."""
    people_only("notify")
    changes: dict[str, Any] = {}
    if push is not None:
        changes["push"] = push == "on"
    if email is not None:
        changes["email"] = email == "on"
    if email_mail is not None:
        changes["email_mail"] = email_mail == "on"
    if content is not None:
        changes["push_content"] = content
    if when_visible is not None:
        changes["skip_when_visible"] = when_visible == "skip"
    if isinstance(quiet, tuple):
        changes["quiet_start"], changes["quiet_end"] = quiet
    if timezone is not None:
        changes["timezone"] = timezone
    if remind_after is not _UNSET:
        changes["remind_after_min"] = remind_after
    if escalate_after is not _UNSET:
        changes["escalate_after_min"] = escalate_after
    if digest_hour is not _UNSET:
        changes["email_digest_hour"] = digest_hour

    async def act(client: AsyncClient) -> NotifyPolicyOut:
        policy = NotifyPolicy(client)
        return await (policy.set(**changes) if changes else policy.get())

    out = run(act)
    if as_json:
        echo_json(out)
        return
    for line in show_policy(out):
        click.echo(line)
