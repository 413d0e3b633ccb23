"""The prompt: every headline branch, the reply rule, the mode briefing, the mail."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mailui4agents.bridge.prompt import (
    Attachment,
    PromptInput,
    PromptMail,
    Situation,
    build_prompt,
    headline,
)
from mailui4agents.bridge.replies import auto_relay_applies, relay_key, starts_turn
from mailui4agents.domain.modes import ENFORCEMENTS, MODES

MAIL = PromptMail(
    mail_id="m1",
    session_id="s1",
    session_alias="claude-fix-login",
    workspace="/srv/shop",
    sender="ana@/srv/shop.claude-fix-login",
    from_human=True,
    to=("claude@/srv/shop.claude-fix-login",),
    cc=(),
    subject="Fix login",
    body="The login form 500s.\nLast requirement: keep the old URL.",
    created_at="2026-12-01T08:00:00Z",
    reply_address="ana@/srv/shop.claude-fix-login",
    self_address="claude@/srv/shop.claude-fix-login",
)
AGENT_MAIL = replace(MAIL, sender="pi@/srv/shop.claude-fix-login", from_human=False,
                     reply_address="pi@/srv/shop.claude-fix-login")  # fmt: skip


def prompt(mail: PromptMail = MAIL, situation: Situation = Situation.NEW_TASK, **kw: object) -> str:
    data = PromptInput(mail=mail, situation=situation, mode="workspace", enforcement="native",
                       agent="claude")  # fmt: skip
    return build_prompt(replace(data, **kw))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("situation", "start", "must"),
    [
        (Situation.NEW_TASK, "NEW TASK from", ""),
        (Situation.REPLY_TO_OWN, "REPLY from", "This is not a new task"),
        (Situation.BACKLOG, "BACKLOG MAIL from", "while this agent was offline"),
        (Situation.CONTINUING, "NEW MAIL from", "already working in"),
        (Situation.INTERRUPTED, "REDELIVERED MAIL from", "previous attempt"),
    ],
)
@pytest.mark.parametrize(
    ("mail", "who"), [(MAIL, "a human (ana@"), (AGENT_MAIL, "another agent (pi@")]
)
def test_every_headline_names_the_situation_and_the_kind_of_sender(
    situation: Situation, start: str, must: str, mail: PromptMail, who: str
) -> None:
    line = headline(situation, mail)
    assert line.startswith(f"{start} {who}")
    assert must in line
    assert prompt(mail, situation).startswith(line)


def test_the_five_headlines_are_all_different() -> None:
    assert len({headline(s, MAIL).split(" from ")[0] for s in Situation}) == 5


def test_a_human_is_told_the_final_text_goes_back_and_an_agent_is_told_it_does_not() -> None:
    human = prompt(MAIL)
    assert "your final text of this turn is sent back to ana@" in human
    assert "Do not also send it with send_mail" in human
    agent = prompt(AGENT_MAIL)
    assert "nothing is sent back automatically" in agent
    assert "send_mail to pi@/srv/shop.claude-fix-login" in agent
    assert "Do not send acknowledgements" in agent
    assert "sent back to" not in agent


def test_the_reply_rule_in_the_prompt_is_the_rule_the_bridge_applies() -> None:
    for from_human in (True, False, None):
        mail = replace(MAIL, from_human=from_human is True)
        relays = auto_relay_applies(from_human=from_human, model_sent_mail=False)
        assert ("is sent back to" in prompt(mail)) is relays
    assert auto_relay_applies(from_human=True, model_sent_mail=True) is False
    assert auto_relay_applies(from_human=None, model_sent_mail=False) is False


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("enforcement", ENFORCEMENTS)
def test_the_mode_and_its_true_enforcement_are_stated(mode: str, enforcement: str) -> None:
    text = prompt(mode=mode, enforcement=enforcement)
    assert f"Permission mode: {mode}" in text
    if mode != "full":
        assert f"Enforcement: {enforcement}" in text
    if enforcement == "partial" and mode != "full":
        assert "do not assume everything will be blocked" in text


def test_the_mail_the_attachments_and_the_exact_addresses_are_in_the_prompt() -> None:
    mail = replace(
        MAIL,
        cc=("bob@/srv/shop.claude-fix-login",),
        attachments=(Attachment("a1", "trace.log", 1234, "text/plain"),),
        in_reply_to="m0",
    )
    text = prompt(mail)
    assert mail.body in text  # the whole body, its last requirement too
    assert "Cc: bob@/srv/shop.claude-fix-login" in text
    assert "trace.log (1234 bytes, text/plain), id a1" in text
    assert "In reply to: m0" in text
    assert "use exactly this to write to ana@/srv/shop.claude-fix-login in this session): " \
           "ana@/srv/shop.claude-fix-login" in text  # fmt: skip
    assert "Your own address in this session: claude@/srv/shop.claude-fix-login" in text
    assert "Attachments: none" in prompt(MAIL)


def test_the_prompt_is_a_pure_function() -> None:
    assert prompt() == prompt()


def test_receipts_and_failure_notices_never_start_a_turn() -> None:
    assert not starts_turn("permission_decision")
    assert not starts_turn("permission_request")
    assert not starts_turn("failure")
    for kind in ("message", "relay", "calendar", "question", "system"):
        assert starts_turn(kind)


def test_relay_keys_are_deterministic_per_mail_and_bounded() -> None:
    assert relay_key("claude", "m1") == relay_key("claude", "m1")
    assert relay_key("claude", "m1") != relay_key("claude", "m2")
    assert len(relay_key("x" * 300, "m1").encode()) <= 160


def test_reply_subjects_and_bodies_stay_within_the_gateway_limits() -> None:
    from mailui4agents.bridge.replies import SUBJECT_MAX_BYTES, clamp_utf8, reply_subject

    long = "重" * 400  # 1200 bytes: a subject the gateway took (≤ 1000 bytes) only just
    assert len(reply_subject(long[:333]).encode()) <= SUBJECT_MAX_BYTES
    assert reply_subject("Re: done") == "Re: done" and reply_subject("done") == "Re: done"
    cut = clamp_utf8(long, 100, "…")
    assert len(cut.encode()) <= 100 and cut.endswith("…") and "\ufffd" not in cut
    assert clamp_utf8("short", 100) == "short"


def test_a_session_with_a_worktree_is_told_its_branch() -> None:
    told = prompt(replace(MAIL, worktree=("agentmail/fix", "main", "/srv/repo")))
    assert "Worktree: this session's own git worktree of /srv/repo, on branch agentmail/fix" in told
    assert "(from main)" in told
    assert "Worktree:" not in prompt()
