"""Fixtures of the e-mail tests: a real SMTP relay on 127.0.0.1
(tests/fakes/smtp_relay.py) and a gateway that sends to it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailui4agents.settings import Settings
from mailui4agents.state import Gateway
from tests.conftest import Api, make_settings
from tests.fakes.smtp_relay import Relay, smtp_relay

MAIL_FROM = "agentmail@gw.test"
LINK = re.compile(r"https?://[^/\s]+/verify-email/([A-Za-z0-9_-]+)")


@pytest.fixture
def relay() -> Iterator[Relay]:
    with smtp_relay() as r:
        yield r


@pytest.fixture
def settings(
    tmp_path: Path, db_backend: str, request: pytest.FixtureRequest, relay: Relay
) -> Settings:
    extra = getattr(request, "param", {})
    return make_settings(
        request,
        tmp_path,
        db_backend,
        smtp_url=relay.url,
        mail_from=MAIL_FROM,
        email_retry_base_s=0.05,
        email_poll_s=0.5,
        **extra,
    )


def gateway_of(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


@pytest.fixture
async def people(api: Api) -> Api:
    await api.user("ana")
    await api.user("bob")
    await api.agent("agent-a", owners=["ana"])
    return api


def link_token(body: str) -> str:
    found = LINK.search(body)
    assert found, body
    return found.group(1)
