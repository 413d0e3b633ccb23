"""`agentmail audit`'s own parts (cli/audit.py): what --since accepts and how a
decision reads on one line. The command end to end against a real gateway is
tests/e2e/test_audit_day.py."""

from __future__ import annotations

from datetime import UTC, datetime

import click
import pytest

from mailui4agents.cli.audit import audit_line, since_time, who_decided

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("30m", "2026-12-03T11:30:00Z"),
        ("2h", "2026-12-03T10:00:00Z"),
        ("7d", "2026-11-26T12:00:00Z"),
        ("45s", "2026-12-03T11:59:15Z"),
        ("2026-12-01T08:00:00Z", "2026-12-01T08:00:00Z"),
        ("2026-12-01T08:00:00+01:00", "2026-12-01T07:00:00Z"),
        ("2026-12-01T08:00:00", "2026-12-01T08:00:00Z"),  # UTC without an offset
    ],
)
def test_since_takes_an_age_or_a_time(given: str, sent: str) -> None:
    assert since_time(given, NOW) == sent


@pytest.mark.parametrize("given", ["yesterday", "3w", "-2h", "1234567h", "999999d", ""])
def test_since_refuses_anything_else_naming_the_option(given: str) -> None:
    with pytest.raises(click.BadParameter) as refused:
        since_time(given, NOW)
    assert refused.value.param_hint == "--since"


def item(**decided_by: object) -> dict[str, object]:
    return {
        "decided_at": "2026-12-03T11:59:00.123Z",
        "outcome": "denied",
        "agent": "claude",
        "tool_name": "Bash",
        "kind": "approval",
        "summary": "git push\n--force",
        "waited_ms": 2500,
        "decided_by": {"channel": None, "device": None, **decided_by},
    }


def test_a_line_says_when_what_who_and_how_long() -> None:
    line = audit_line(item(kind="person", name="ana", channel="push", device="Ana's phone"))
    assert line == (
        "2026-12-03 11:59:00  denied       claude       Bash: git push --force"
        "  — ana (push, Ana's phone), waited 2.5 s"
    )


@pytest.mark.parametrize(
    ("by", "said"),
    [
        ({"kind": "rule", "id": "r-7", "channel": "rule"}, "rule r-7"),
        ({"kind": "grant", "id": "g1", "channel": "grant"}, "grant g1"),
        ({"kind": "mode", "name": "full", "channel": "system"}, "mode full"),
        ({"kind": "terminal", "name": "claude", "channel": "terminal"}, "claude's terminal"),
        ({"kind": "timeout", "channel": "system"}, "timeout"),
        ({"kind": "sandbox", "channel": "system"}, "sandbox"),
        ({"kind": "person", "name": "bob", "channel": "api"}, "bob (api)"),
    ],
)
def test_who_decided_in_words(by: dict[str, object], said: str) -> None:
    assert who_decided(item(**by)) == said
