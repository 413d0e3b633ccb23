"""`ask_human`'s answer text from a decided question (mcp/ask.outcome): who
answered, from where (domain/decided_via.py), and each way of getting no answer
as its own error. Pure: the decision decoded from the gateway's JSON as the tool
decodes it (client/asking.Decision)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.fastmcp.exceptions import ToolError

from mailui4agents.client.asking import Decision
from mailui4agents.mcp.ask import outcome


def closed(decision: str, via: dict[str, Any] | None = None, **extra: Any) -> Decision:
    return Decision.of({"decision": decision, "decided_by": "ana", "decided_via": via, **extra})


def test_an_answer_names_the_device_it_came_from() -> None:
    phone = {"channel": "push", "device": "Ana's phone"}
    assert outcome(closed("approve", phone, answers=["release"]), 5) == (
        "ana answered from Ana's phone: release"
    )
    both = closed("approve", {"channel": "web"}, answers=["a", "b"], note="both")
    assert outcome(both, 5) == "ana answered from the web:\n- a\n- b\nnote: both"
    assert outcome(closed("approve", {"channel": "api"}), 5) == (
        "ana accepted through the API without an answer text"
    )


def test_without_a_channel_the_answer_names_only_who() -> None:
    assert outcome(closed("approve", answers=["release"]), 5) == "ana answered: release"


def test_a_refusal_names_who_and_where_with_the_note() -> None:
    phone = {"channel": "push", "device": "Ana's phone"}
    with pytest.raises(ToolError) as refused:
        outcome(closed("deny", phone, note="never"), 5)
    assert str(refused.value) == "the human refused (denied by ana from Ana's phone): never"


@pytest.mark.parametrize(
    ("decision", "words"),
    [("expired", "timed out"), ("cancelled", "cancelled by ana"), ("maybe", "'maybe'")],
)
def test_no_answer_is_an_error_in_its_own_words(decision: str, words: str) -> None:
    with pytest.raises(ToolError) as failed:
        outcome(closed(decision, {"channel": "system"}), 5)
    assert words in str(failed.value)
