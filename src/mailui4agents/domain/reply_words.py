"""What a person wrote in a reply e-mail, and what it decides (docs/email.md,
"Replies"): pure, no I/O.

A reply carries the person's words and, below or above them, the e-mail they
answer. Only the person's own lines count:

- quoted lines (`>`, as every client quotes in plain text; in HTML, a
  `blockquote` or a client's quote container, domain/email_reading.py) never;
- the signature (`-- ` and what follows) never;
- the attribution ("On Mon, 1 Dec 2026, agentmail <…> wrote:", also wrapped over
  two lines, and its common translations) is skipped;
- Outlook quotes without `>`: from its header block ("From: …" then "Sent: …"
  or "Date: …"), a "-----Original Message-----" line or a long underscore rule
  on, everything is the original.

The first of the person's lines decides a request: `approve`, `deny` with an
optional note after it, `always` (approve and allow the same again, as the web
UI's "always"), or, for a question, an option's label or number. Anything else
decides nothing: a quoted old "approve" must never count, and a sentence that
merely contains the word is not an answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_ATTRIBUTION_END = re.compile(
    r"(wrote|schrieb|a écrit|escribió|scrisse|schreef|skrev|napisał|написал\(а\))\s*:\s*$",
    re.IGNORECASE,
)
_ATTRIBUTION_START = re.compile(r"^(on|am|le|el|il|op|den|dnia|w dniu)\s", re.IGNORECASE)
_ORIGINAL = re.compile(
    r"^(-{2,}\s*(original message|ursprüngliche nachricht|message d'origine)\s*-{2,}"
    r"|_{10,}|begin forwarded message:)\s*$",
    re.IGNORECASE,
)
_HEADER_FROM = re.compile(r"^\*?(from|von|de|van|da)\s*:\*?\s", re.IGNORECASE)
_HEADER_NEXT = re.compile(
    r"^\*?(sent|date|to|cc|subject|gesendet|datum|an|betreff|envoyé|objet)\s*:", re.IGNORECASE
)
_SEPARATORS = " \t.,;:!-–—"  # between `deny` and its note, and after a word
MAX_LINES = 2000  # of a body looked at: the person's words are at its top or below a quote


@dataclass(frozen=True)
class Decision:
    """What a reply decides: `approve` or `deny`, a note, `always` (a standing
    grant), a question's answers."""

    decision: str
    note: str | None = None
    always: bool = False
    answers: list[str] | None = None


def _is_quoted(line: str) -> bool:
    return line.lstrip().startswith(">")


def _is_signature(line: str) -> bool:
    return line.rstrip("\r") in ("-- ", "--") or line.strip() == "--"


def _outlook_block(lines: Sequence[str], i: int) -> bool:
    """Line i opens Outlook's header block of the original: "From: …" followed,
    within the next three lines, by "Sent:" / "Date:" / "To:" / "Subject:"."""
    if not _HEADER_FROM.match(lines[i].strip()):
        return False
    return any(_HEADER_NEXT.match(line.strip()) for line in lines[i + 1 : i + 4])


def _attribution(lines: Sequence[str], i: int) -> int:
    """How many lines from i are an attribution ("On … wrote:"): 0, 1 or 2."""
    line = lines[i].strip()
    if _ATTRIBUTION_END.search(line) and (_ATTRIBUTION_START.match(line) or "@" in line):
        return 1
    if _ATTRIBUTION_START.match(line) and i + 1 < len(lines):
        nxt = lines[i + 1].strip()
        if _ATTRIBUTION_END.search(nxt) and not _is_quoted(nxt):
            return 2
    return 0


def own_lines(text: str) -> list[str]:
    """The person's own lines of a reply's text, in order, blank lines kept
    between them (see the module text for what is left out)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")[:MAX_LINES]
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _is_signature(line) or _ORIGINAL.match(line.strip()) or _outlook_block(lines, i):
            break
        skip = _attribution(lines, i)
        if skip:
            i += skip
            continue
        if not _is_quoted(line):
            out.append(line.rstrip())
        i += 1
    while out and not out[-1].strip():
        out.pop()
    while out and not out[0].strip():
        out.pop(0)
    squeezed: list[str] = []
    for line in out:  # a quote taken out leaves no run of blank lines behind
        if line.strip() or (squeezed and squeezed[-1].strip()):
            squeezed.append(line)
    return squeezed


def own_text(text: str) -> str:
    """The person's own words, as one text (a reply that goes on as a mail)."""
    return "\n".join(own_lines(text)).strip()


def first_line(text: str) -> str | None:
    """The first of the person's lines that is not empty: the one that decides."""
    for line in own_lines(text):
        if line.strip():
            return line.strip()
    return None


def _word(line: str) -> tuple[str, str]:
    """The first word, lower-cased, and the rest after the separators."""
    head, _, rest = line.strip().partition(" ")
    bare = head.rstrip(_SEPARATORS)
    if ":" in bare:  # "deny:use the staging db"
        bare, _, more = bare.partition(":")
        rest = f"{more} {rest}".strip()
    return bare.lower(), rest.lstrip(_SEPARATORS).rstrip()


def _option(token: str, labels: Sequence[str]) -> str | None:
    value = token.strip().strip(_SEPARATORS).strip()
    if not value:
        return None
    number = value.lstrip("#").rstrip(").")
    if number.isdigit():
        n = int(number)
        return labels[n - 1] if 1 <= n <= len(labels) else None
    folded = value.casefold()
    for label in labels:
        if label.strip().casefold() == folded:
            return label
    return None


def _answers(line: str, labels: Sequence[str], multi: bool) -> list[str] | None:
    whole = _option(line, labels)
    if whole is not None:
        return [whole]
    if not multi:
        return None
    parts = [p for p in re.split(r"\s*(?:,|;|\band\b|\s)\s*", line.strip()) if p]
    picked = [_option(p, labels) for p in parts]
    if not picked or any(p is None for p in picked):
        return None
    return list(dict.fromkeys(p for p in picked if p is not None))


def read_decision(
    text: str,
    *,
    kind: str,
    options: Sequence[dict[str, Any]] | None = None,
    multi_select: bool = False,
) -> Decision | None:
    """What the reply's text decides for a request of `kind` (approval or
    question), or None when its first own line says nothing we understand."""
    line = first_line(text)
    if line is None:
        return None
    word, rest = _word(line)
    if word == "deny":
        return Decision("deny", note=rest or None)
    if kind == "question":
        if options is None:  # a free-text question: the person's words are the answer
            return Decision("approve", answers=[own_text(text)])
        labels = [str(o.get("label", "")) for o in options]
        answers = _answers(line, labels, multi_select)
        return Decision("approve", answers=answers) if answers else None
    if rest:
        return None  # "approve it later?": a sentence is no answer
    if word == "approve":
        return Decision("approve")
    if word == "always":
        return Decision("approve", always=True)
    return None


_RE = re.compile(r"^\s*((re|aw|sv|vs|antw|wg|fw|fwd|tr)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)


def bare_subject(subject: str) -> str:
    """The subject without its "Re:" / "AW:" / "Fwd:" prefixes."""
    return _RE.sub("", " ".join(subject.split())).strip()
