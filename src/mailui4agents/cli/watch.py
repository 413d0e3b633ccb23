"""``agentmail watch``: print live events until Ctrl-C."""

from __future__ import annotations

import signal
from collections.abc import Callable
from contextlib import aclosing, suppress

import anyio
import click
import httpx

from mailui4agents.cli.common import load_config, run
from mailui4agents.cli.output import event_json, event_line
from mailui4agents.client import ApiError, AsyncClient

EVENT_STREAM = "text/event-stream"


def _report_retry(error: ApiError | None, delay: float) -> None:
    if error is not None:  # a stream that merely ended is routine; stay quiet
        click.echo(f"{error.message}; retrying in {delay:.1f} s", err=True)


class _OpenedTransport(httpx.AsyncBaseTransport):
    """The default transport, calling ``on_open`` once an event stream answers 200.

    That is the moment events start to flow to this watcher, so scripts (and
    tests) can wait for the "watching" line instead of sleeping.
    """

    def __init__(self, on_open: Callable[[], None]) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._on_open = on_open

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        content_type = response.headers.get("content-type", "").lower()
        if response.status_code == 200 and content_type.startswith(EVENT_STREAM):
            self._on_open()
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """Ctrl-C (or SIGTERM) ends the watch by cancelling it, every time. Left to
    asyncio's own SIGINT handling, Ctrl-C cancels the loop's main task, and a
    cancellation that lands inside the stream's reconnect or read could be taken
    for a dropped connection: the watch went on (seen under load in CI)."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            scope.cancel()
            return


@click.command("watch")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@click.option("--since", type=int, metavar="ID", help="Replay events after this event id first.")
def watch(as_json: bool, since: int | None) -> None:
    """Print live events, one line each, until Ctrl-C.

    Once the stream is open, "watching … (Ctrl-C to stop)" goes to stderr.
    """
    config = load_config()
    announced = False

    def opened() -> None:
        nonlocal announced
        if not announced:  # reconnects stay quiet; the retry message said enough
            announced = True
            click.echo(f"watching {config.url} (Ctrl-C to stop)", err=True)

    async def follow(client: AsyncClient) -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
            async with aclosing(client.events(since, on_retry=_report_retry)) as stream:
                async for event in stream:
                    click.echo(event_json(event) if as_json else event_line(event))  # flushes

    with suppress(KeyboardInterrupt):  # Ctrl-C is how watching ends
        run(follow, config=config, transport=_OpenedTransport(opened))
