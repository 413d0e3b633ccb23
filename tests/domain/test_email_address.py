"""Addresses and the relay URL (domain/email_address.py): what is accepted, how
it is normalised, and each refusal; the URL never carries a password."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.domain.email_address import (
    BadAddress,
    Listen,
    Mailbox,
    Relay,
    is_loopback,
    normalise_address,
    parse_listen,
    parse_mailbox,
    parse_relay,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("ana@example.org", "ana@example.org"),
        ("  Ana.Smith+agentmail@Example.ORG  ", "ana.smith+agentmail@example.org"),
        ("ana@example.org.", "ana@example.org"),
        ("ana@bücher.example", "ana@xn--bcher-kva.example"),
        ("o'neil@sub.example.co.uk", "o'neil@sub.example.co.uk"),
    ],
)
def test_addresses_are_lower_cased_with_an_idna_domain(text: str, want: str) -> None:
    assert normalise_address(text) == want


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ana",
        "ana@",
        "@example.org",
        "ana@example",  # no dot
        "ana@@example.org",
        "ana@10.0.0.1",
        "ana..smith@example.org",
        "ana.@example.org",
        '"ana"@example.org',
        "ana smith@example.org",
        "ana@exa mple.org",
        "ana@example.org\nBcc: eve@evil.test",
        "ana\x00@example.org",
        "<ana@example.org>",
        "ana@-example.org",
        "ana@example-.org",
        "a" * 65 + "@example.org",
        "ana@" + "a" * 64 + ".org",
        "ana@" + ".".join(["a" * 60] * 5) + ".org",
    ],
)
def test_what_is_no_address_is_refused(text: str) -> None:
    with pytest.raises(BadAddress):
        normalise_address(text)


@given(st.emails())
def test_normalising_twice_changes_nothing(address: str) -> None:
    try:
        once = normalise_address(address)
    except BadAddress:
        return  # hypothesis's addresses include forms we refuse (IP domains, …)
    assert normalise_address(once) == once


def test_relay_urls() -> None:
    assert parse_relay("smtp://gw@mail.example.org:2525") == Relay(
        "mail.example.org", 2525, False, "gw"
    )
    assert parse_relay("smtps://mail.example.org") == Relay("mail.example.org", 465, True, None)
    assert parse_relay("smtp://mail.example.org").port == 587
    # A user name with an @: the last @ ends it (percent-encoded or not).
    for url in (
        "smtp://agentmail@example.org@smtp.example.org:587",
        "smtp://agentmail%40example.org@smtp.example.org:587",
    ):
        relay = parse_relay(url)
        assert (relay.username, relay.host) == ("agentmail@example.org", "smtp.example.org")
    assert parse_relay("smtp://[::1]:25").shown() == "smtp://[::1]:25"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("smtp://gw:secret@mail.example.org", "password"),
        ("http://mail.example.org", "smtp://"),
        ("smtp://", "host"),
        ("smtp://mail.example.org:0", "port"),
        ("smtp://mail.example.org:99999", "port"),
        ("smtp://mail.example.org/x", "path"),
    ],
)
def test_bad_relay_urls_say_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_relay(url)


def test_loopback_is_localhost_and_loopback_addresses_only() -> None:
    assert all(is_loopback(h) for h in ("localhost", "127.0.0.1", "127.9.9.9", "::1"))
    assert not any(
        is_loopback(h) for h in ("192.0.2.2", "mail.example.org", "localhost.evil.test", "::")
    )


def test_imap_urls() -> None:
    assert parse_mailbox("imaps://agentmail%40example.org@imap.example.org") == Mailbox(
        "imap.example.org", 993, True, "agentmail@example.org", "INBOX"
    )
    box = parse_mailbox("imap://gw@127.0.0.1:1143/Needs%20reply")
    assert (box.port, box.implicit_tls, box.mailbox, box.loopback) == (
        1143,
        False,
        "Needs reply",
        True,
    )
    assert parse_mailbox("imap://gw@mail.example.org").port == 143
    assert not parse_mailbox("imap://gw@mail.example.org").loopback  # STARTTLS required
    shown = parse_mailbox("imaps://gw@[::1]:993/INBOX").shown()
    assert shown == "imaps://gw@[::1]:993/INBOX"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("imaps://gw:secret@imap.example.org", "password"),
        ("https://gw@imap.example.org", "imaps://"),
        ("imaps://imap.example.org", "user"),
        ("imaps://gw@", "host"),
        ("imaps://gw@imap.example.org:0", "port"),
        ("imaps://gw@imap.example.org:x", "port"),
        ("imaps://gw@imap.example.org/INBOX?x=1", "query"),
        ("imaps://gw@imap.example.org/Bo%C3%AEte", "ASCII"),
        ("imaps://gw@imap.example.org/a%0Ab", "ASCII"),
        ("imaps://gw@imap.example.org/" + "a" * 201, "200"),
    ],
)
def test_bad_imap_urls_say_what_is_wrong(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_mailbox(url)


def test_listener_addresses() -> None:
    assert parse_listen("127.0.0.1:2525") == Listen("127.0.0.1", 2525)
    assert parse_listen("[::1]:25") == Listen("::1", 25)
    assert parse_listen("0.0.0.0:0") == Listen("0.0.0.0", 0)  # 0: a free port
    for bad in ("2525", ":25", "::1:25", "[::1:25", "host:65536", "host:-1", "host:"):
        with pytest.raises(ValueError):
            parse_listen(bad)
