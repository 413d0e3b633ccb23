"""``agentmail notify``: your notifications (docs/remote.md, "Push").

A click group so that each notification command is a subcommand of it:
``agentmail notify test`` here; others (``notify settings``) are added beside it
with ``@notify.command(...)``.
"""

from __future__ import annotations

import click

from mailui4agents.cli.common import echo_json, fail, load_config, run
from mailui4agents.client import AsyncClient
from mailui4agents.wire.push import PushTestOut, PushTestResult


@click.group("notify")
def notify() -> None:
    """Your notifications: test push to your devices."""


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
    if load_config().is_agent:
        fail("notify is for people: this CLI uses an agent key (AGENTMAIL_KEY)")

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
