"""What a reply e-mail says (domain/reply_words.py, domain/email_reading.py):
the person's own first line, as each common mail client writes a reply."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from mailui4agents.domain.email_reading import html_text, read
from mailui4agents.domain.reply_words import (
    Decision,
    bare_subject,
    first_line,
    own_text,
    read_decision,
)

ORIGINAL = "agentmail wants to use Bash:\n    make deploy\nReply approve or deny."


def quoted(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.splitlines())


def approval(text: str) -> Decision | None:
    return read_decision(text, kind="approval")


GMAIL = f"deny use the staging db\n\nOn Mon, 30 Nov 2026 at 10:02, agentmail <agentmail@gw.test> wrote:\n\n{quoted(ORIGINAL)}\n"  # noqa: E501
GMAIL_WRAPPED = (
    "approve\n\nOn Mon, 30 Nov 2026 at 10:02, agentmail via a rather long name\n"
    f"<agentmail+abc@gw.test> wrote:\n{quoted(ORIGINAL)}\n"
)
APPLE = f"Approve.\n\nSent from my iPhone\n\n> On 30 Nov 2026, at 10:02, agentmail <agentmail@gw.test> wrote:\n>\n{quoted(ORIGINAL)}\n"  # noqa: E501
OUTLOOK = (
    "deny: not on a Friday\r\n\r\n________________________________\r\n"
    "From: agentmail <agentmail@gw.test>\r\nSent: Monday, 30 November 2026 10:02\r\n"
    "To: Ana <ana@example.org>\r\nSubject: [shop] Approval: Bash from claude\r\n\r\n"
    "approve\r\n"
)
OUTLOOK_NO_RULE = (
    "always\n\nFrom: agentmail <agentmail@gw.test>\nSent: Monday\nTo: ana\n\napprove\n"
)
BOTTOM_POSTED = f"On Mon, 30 Nov 2026, agentmail wrote:\n{quoted(ORIGINAL)}\n\ndeny\n-- \nAna\n"
GERMAN = f"approve\n\nAm 30.11.2026 um 10:02 schrieb agentmail <agentmail@gw.test>:\n{quoted(ORIGINAL)}\n"  # noqa: E501


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("approve", Decision("approve")),
        ("Approve.", Decision("approve")),
        ("APPROVE!\n", Decision("approve")),
        ("deny use the staging db", Decision("deny", note="use the staging db")),
        ("Deny: not on a Friday!", Decision("deny", note="not on a Friday!")),
        ("deny", Decision("deny")),
        ("always", Decision("approve", always=True)),
        (GMAIL, Decision("deny", note="use the staging db")),
        (GMAIL_WRAPPED, Decision("approve")),
        (APPLE, Decision("approve")),
        (OUTLOOK, Decision("deny", note="not on a Friday")),
        (OUTLOOK_NO_RULE, Decision("approve", always=True)),
        (BOTTOM_POSTED, Decision("deny")),
        (GERMAN, Decision("approve")),
        ("\n\n  approve  \n-- \nAna", Decision("approve")),
    ],
)
def test_the_first_own_line_decides(text: str, expected: Decision) -> None:
    assert approval(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        quoted("approve"),  # the only approve is quoted
        f"Thanks!\n\n{quoted('approve')}",
        f"On Mon, agentmail wrote:\n{quoted(ORIGINAL)}\n> approve\n",
        "-- \napprove",  # in the signature
        "approve it later?",  # a sentence is no answer
        "I approve",
        "yes",
        "",
        "From: agentmail <agentmail@gw.test>\nSent: Monday\n\napprove",  # Outlook's original
        "-----Original Message-----\napprove",
    ],
)
def test_nothing_else_decides(text: str) -> None:
    assert approval(text) is None


def test_a_question_by_label_or_number() -> None:
    options = [{"label": "Postgres"}, {"label": "SQLite"}]

    def ask(text: str, multi: bool = False) -> Decision | None:
        return read_decision(text, kind="question", options=options, multi_select=multi)

    assert ask("2") == Decision("approve", answers=["SQLite"])
    assert ask("2.") == Decision("approve", answers=["SQLite"])
    assert ask("postgres") == Decision("approve", answers=["Postgres"])
    assert ask("3") is None
    assert ask("approve") is None  # not an option
    assert ask("1, 2") is None  # one option only
    assert ask("1, 2", multi=True) == Decision("approve", answers=["Postgres", "SQLite"])
    assert ask("deny not now") == Decision("deny", note="not now")
    free = read_decision(f"Use the staging db.\nPort 5433.\n\n{quoted('?')}", kind="question")
    assert free == Decision("approve", answers=["Use the staging db.\nPort 5433."])


def test_own_text_keeps_the_persons_words_only() -> None:
    text = f"Hi,\n\nplease retry.\n\n-- \nAna\n\nOn Mon, x wrote:\n{quoted(ORIGINAL)}"
    assert own_text(text) == "Hi,\n\nplease retry."
    assert own_text(f"{quoted(ORIGINAL)}\n\nLooks good.\n\n{quoted('more')}\n\nThanks") == (
        "Looks good.\n\nThanks"
    )
    assert first_line("\n\n> x\n\nhello\n") == "hello"


def test_subjects_lose_their_reply_prefixes() -> None:
    assert bare_subject("Re: AW: [shop.fix] Approval: Bash") == "[shop.fix] Approval: Bash"
    assert bare_subject("RE[2]:  fix  the login") == "fix the login"
    assert bare_subject("Fwd: Re: x") == "x"


GMAIL_HTML = (
    '<div dir="ltr">Deny use the staging db</div><br><div class="gmail_quote">'
    '<div dir="ltr" class="gmail_attr">On Mon, 30 Nov 2026 at 10:02, agentmail '
    "&lt;agentmail@gw.test&gt; wrote:<br></div>"
    '<blockquote class="gmail_quote"><p>approve</p></blockquote></div>'
)
OUTLOOK_HTML = (
    "<html><head><style>p {color: red}</style></head><body><p>approve</p>"
    '<div id="appendonsend"></div><hr><div id="divRplyFwdMsg"><b>From:</b> agentmail'
    "<br><b>Sent:</b> Monday</div><p>deny</p></body></html>"
)
APPLE_HTML = (
    '<html><body><div>always</div><div><br><blockquote type="cite"><div>On 30 Nov, '
    "agentmail wrote:</div><div>approve</div></blockquote></div></body></html>"
)


def test_html_only_replies_are_read_with_an_html_parser() -> None:
    assert read_decision(html_text(GMAIL_HTML), kind="approval") == Decision(
        "deny", note="use the staging db"
    )
    assert read_decision(html_text(OUTLOOK_HTML), kind="approval") == Decision("approve")
    assert "color" not in html_text(OUTLOOK_HTML)  # style is no text
    assert read_decision(html_text(APPLE_HTML), kind="approval") == Decision("approve", always=True)
    only_quoted = '<blockquote type="cite"><div>approve</div></blockquote><div></div>'
    assert read_decision(html_text(only_quoted), kind="approval") is None
    # A script's text is no text either, nor is a tag's attribute.
    assert html_text('<script>approve</script><p title="approve">ok</p>') == "ok"


def _mail(plain: str | None, rich: str | None) -> bytes:
    msg = EmailMessage()
    msg["From"] = "Ana <ana@example.org>"
    msg["To"] = "agentmail+x@gw.test"
    msg["Subject"] = "Re: x"
    if plain is not None:
        msg.set_content(plain)
        if rich is not None:
            msg.add_alternative(rich, subtype="html")
    elif rich is not None:
        msg.set_content(rich, subtype="html")
    return msg.as_bytes()


def test_text_plain_wins_over_html_and_html_alone_is_read() -> None:
    both = read(_mail("deny from plain", "<p>approve</p>"))
    assert approval(both.text) == Decision("deny", note="from plain")
    only_html = read(_mail(None, GMAIL_HTML))
    assert approval(only_html.text) == Decision("deny", note="use the staging db")
    assert only_html.from_addresses == ["ana@example.org"]
    assert only_html.recipients == ["agentmail+x@gw.test"]
