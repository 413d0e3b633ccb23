"""E-mail addresses and the SMTP relay's URL (docs/email.md): pure rules, no I/O.

An address is kept lower-cased, its domain in IDNA (ASCII) form: the gateway
compares addresses (one person's list; later the `From` of a reply) and must
not see `Ana@Example.org` and `ana@example.org` as two people.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from urllib.parse import SplitResult, unquote, urlsplit

MAX_ADDRESS = 254  # RFC 5321 §4.5.3.1.3: a path is at most 256 octets, brackets included
MAX_LOCAL = 64
# RFC 5322 dot-atom text: what a local part may hold without quoting. Quoted
# local parts ("a b"@x) are refused: nobody needs one, and every one is a way
# to confuse a later comparison.
_ATEXT = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$")
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


class BadAddress(ValueError):
    """Why a text is no address we accept (the message names the part)."""


def normalise_address(text: str) -> str:
    """`local@domain`, lower-cased, the domain IDNA-encoded; BadAddress otherwise."""
    value = text.strip()
    if not value:
        raise BadAddress("an address is needed, e.g. ana@example.org")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in value):
        raise BadAddress("an address holds no spaces or control characters")
    if value.count("@") != 1:
        raise BadAddress("an address has exactly one @, e.g. ana@example.org")
    local, domain = value.split("@")
    if not local or len(local) > MAX_LOCAL or not _ATEXT.match(local):
        raise BadAddress(
            f"the part before @ must be 1-{MAX_LOCAL} letters, digits, dots (not at "
            "either end, never two together) or one of !#$%&'*+/=?^_`{|}~-"
        )
    domain = domain.rstrip(".").lower()
    try:
        ascii_domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        raise BadAddress(f"{domain!r} is no domain name") from None
    labels = ascii_domain.split(".")
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        raise BadAddress(f"{domain!r} is no domain name (e.g. example.org)")
    if labels[-1].isdigit():
        raise BadAddress("the domain must be a name, not an IP address")
    address = f"{local.lower()}@{ascii_domain}"
    if len(address) > MAX_ADDRESS:
        raise BadAddress(f"an address is at most {MAX_ADDRESS} characters")
    return address


def domain_of(address: str) -> str:
    """The part after the last @ (of `mail_from`: the Message-ID's right side)."""
    return address.rsplit("@", 1)[-1]


@dataclass(frozen=True)
class Relay:
    """Where outgoing mail goes: `smtp://user@host:port` (STARTTLS when offered,
    required unless the host is loopback) or `smtps://…` (TLS from the first byte)."""

    host: str
    port: int
    implicit_tls: bool
    username: str | None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def shown(self) -> str:
        """The URL again, for logs and errors (it never holds a password)."""
        scheme = "smtps" if self.implicit_tls else "smtp"
        user = f"{self.username}@" if self.username else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}"


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback IP literal: mail that never leaves the machine."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_relay(url: str) -> Relay:
    """The relay of `--smtp-url`; ValueError saying what is wrong. A password in
    the URL is refused: the URL is on the command line, where `ps` shows it."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("smtp", "smtps"):
        raise ValueError("the SMTP URL must start smtp:// or smtps://, e.g. smtp://user@host:587")
    if parts.password is not None:
        raise ValueError(
            "the SMTP URL must not hold the password: use --smtp-password-file or "
            "AGENTMAIL_SMTP_PASSWORD"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("the SMTP URL has no path, query or fragment: smtp[s]://user@host:port")
    host = parts.hostname
    if not host:
        raise ValueError("the SMTP URL needs a host, e.g. smtp://user@mail.example.org:587")
    implicit = parts.scheme == "smtps"
    port = _port(parts, "SMTP", 465 if implicit else 587)
    username = unquote(parts.username) if parts.username else None
    return Relay(host=host, port=port, implicit_tls=implicit, username=username)


MAX_MAILBOX = 200


@dataclass(frozen=True)
class Mailbox:
    """The gateway's own IMAP mailbox (`--imap-url`): `imaps://user@host:port/MAILBOX`
    (TLS from the first byte) or `imap://…` (STARTTLS, required unless the host is
    loopback). MAILBOX is INBOX unless named."""

    host: str
    port: int
    implicit_tls: bool
    username: str
    mailbox: str

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def shown(self) -> str:
        """The URL again, for logs and errors (it never holds a password)."""
        scheme = "imaps" if self.implicit_tls else "imap"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{self.username}@{host}:{self.port}/{self.mailbox}"


def parse_mailbox(url: str) -> Mailbox:
    """The mailbox of `--imap-url`; ValueError saying what is wrong. As for the SMTP
    URL, a password in it is refused."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("imap", "imaps"):
        raise ValueError(
            "the IMAP URL must start imaps:// or imap://, e.g. imaps://user@host:993/INBOX"
        )
    if parts.password is not None:
        raise ValueError(
            "the IMAP URL must not hold the password: use --imap-password-file or "
            "AGENTMAIL_IMAP_PASSWORD"
        )
    if parts.query or parts.fragment:
        raise ValueError("the IMAP URL has no query or fragment: imap[s]://user@host:port/MAILBOX")
    host = parts.hostname
    if not host:
        raise ValueError("the IMAP URL needs a host, e.g. imaps://user@imap.example.org:993")
    if not parts.username:
        raise ValueError("the IMAP URL needs the user to log in as, e.g. imaps://user@host:993")
    implicit = parts.scheme == "imaps"
    port = _port(parts, "IMAP", 993 if implicit else 143)
    mailbox = unquote(parts.path.lstrip("/")) or "INBOX"
    if (
        len(mailbox) > MAX_MAILBOX
        or not mailbox.isascii()
        or any(ord(c) < 32 or ord(c) == 127 for c in mailbox)
    ):
        raise ValueError(
            f"the IMAP URL's mailbox must be at most {MAX_MAILBOX} printable ASCII characters"
        )
    return Mailbox(host, port, implicit, unquote(parts.username), mailbox)


@dataclass(frozen=True)
class Listen:
    """Where the SMTP listener (`--smtp-listen HOST:PORT`) binds; port 0: a free one."""

    host: str
    port: int


def parse_listen(text: str) -> Listen:
    """`HOST:PORT`, `[v6]:PORT`; ValueError saying what is wrong."""
    value = text.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError("the SMTP listener is HOST:PORT, e.g. 127.0.0.1:2525")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError("an IPv6 listener address is written [::1]:2525")
        host = host[1:-1]
    elif ":" in host:
        raise ValueError("an IPv6 listener address is written [::1]:2525")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError("the SMTP listener's port must be a number from 0 to 65535")
    return Listen(host, int(port_text))


def _port(parts: SplitResult, kind: str, default: int) -> int:
    """The URL's port (`default` when it names none), 1 to 65535."""
    bad = f"the {kind} URL's port must be a number from 1 to 65535"
    try:
        port = parts.port
    except ValueError:
        raise ValueError(bad) from None
    if port is None:
        return default
    if not 1 <= port <= 65535:
        raise ValueError(bad)
    return port
