"""The messages the gateway writes (services/email_message.py), parsed back with
Python's `email` package as a mail client would: headers, threading, masking,
the HTML alternative's sanitising. Pure: no relay, no database."""

from __future__ import annotations

import email
import email.message
import email.policy

from mailui4agents.services.email_message import (
    MAX_INPUT_CHARS,
    request_mail,
    request_text,
    subject_tag,
    verification_mail,
)

FROM = "agentmail@gw.example"


def parse(text: str) -> email.message.EmailMessage:
    msg = email.message_from_bytes(text.encode("ascii"), policy=email.policy.default)
    assert isinstance(msg, email.message.EmailMessage)
    return msg


def test_subject_tags_name_the_workspace_and_the_alias() -> None:
    assert subject_tag("fix-login", "/srv/shop") == "[shop.fix-login]"
    assert subject_tag(None, "/srv/shop/") == "[shop]"
    assert subject_tag("x", "") == "[x]"
    assert subject_tag(None, "") == "[agentmail]"


def test_the_verification_mail_is_7_bit_with_a_stable_message_id() -> None:
    mid, text = verification_mail(
        outbox_id="0f0e", mail_from=FROM, to="zoe@example.org", person="Zoë",
        link="https://gw/verify-email/t", ttl_s=86400,
    )  # fmt: skip
    assert mid == "<0f0e@gw.example>"
    assert "\r\n" in text
    msg = parse(text)
    assert msg["Message-ID"] == mid and msg["Auto-Submitted"] == "auto-generated"
    body = msg.get_body(("plain",))
    assert body is not None
    content = body.get_content()
    assert "as Zoë added" in content and "for 24 hours" in content


def test_a_request_mail_masks_secrets_in_keys_and_text_and_threads_by_session() -> None:
    text = request_text(
        kind="approval",
        agent="claude",
        tool_name="Bash",
        tool_input={
            "command": "curl -H 'Authorization: Bearer abc.def.ghi' x",
            "env": {"API_TOKEN": "t0p"},
        },
        summary=None,
        question=None,
        options=None,
        alias="fix-login",
        workspace="/srv/shop",
        link="https://gw.example/approvals#req-1",
    )
    assert text.subject == "[shop.fix-login] Approval: Bash from claude"
    _, raw = request_mail(
        outbox_id="abc", mail_from=FROM, to="ana@example.org", session_id="S1", text=text
    )
    msg = parse(raw)
    assert msg["In-Reply-To"] == msg["References"] == "<session.S1@gw.example>"
    plain, rich = msg.get_body(("plain",)), msg.get_body(("html",))
    assert plain is not None and rich is not None
    for part in (plain.get_content(), rich.get_content()):
        assert "abc.def.ghi" not in part and "t0p" not in part and "***" in part
    assert 'href="https://gw.example/approvals#req-1"' in rich.get_content()


def test_a_question_lists_its_options_and_long_input_is_cut() -> None:
    text = request_text(
        kind="question", agent="claude", tool_name=None, tool_input=None, summary=None,
        question="Which database?", options=[{"label": "staging"}, {"label": "prod"}],
        alias=None, workspace="/srv/shop", link=None,
    )  # fmt: skip
    assert text.subject == "[shop] Question from claude"
    assert "1. staging\n2. prod" in text.shown
    long = request_text(
        kind="approval", agent="a", tool_name="Write", tool_input={"content": "x" * 10_000},
        summary=None, question=None, options=None, alias=None, workspace="/w", link=None,
    )  # fmt: skip
    assert len(long.shown) == MAX_INPUT_CHARS and long.shown.endswith("…")
    _, raw = request_mail(outbox_id="q", mail_from=FROM, to="a@example.org", session_id="S",
                          text=text)  # fmt: skip
    rich = parse(raw).get_body(("html",))
    assert rich is not None and "<a " not in rich.get_content()
