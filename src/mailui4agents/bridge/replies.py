"""Which mails start a turn, and when the turn's final text goes back
(docs/behaviour.md#replies-relays-budgets-loops).

One place for the rule, used by the bridge when it relays and by the prompt
when it tells the model what will happen to its answer.
"""

from __future__ import annotations

from mailui4agents.domain.relay_keys import clamp_relay_key

# Which mail types start no turn is the gateway's rule too (who may set an agent
# to work does not judge them): one list, in domain/tasking.py.
from mailui4agents.domain.tasking import NO_TURN_TYPES as NO_TURN_TYPES


def starts_turn(mail_type: str | None) -> bool:
    """True for mail the model should work on (messages, relays, calendar mail, ...)."""
    return mail_type not in NO_TURN_TYPES


def auto_relay_applies(*, from_human: bool | None, model_sent_mail: bool) -> bool:
    """The final text goes back as a relay only to a human, and only when the model
    did not already send mail itself in the turn (no double answers). A missing
    ``from_human`` counts as an agent: agents that auto-reply thank each other forever."""
    return from_human is True and not model_sent_mail


def relay_key(agent: str, mail_id: str) -> str:
    """The same for every attempt at one mail, so a retried turn cannot post twice."""
    return clamp_relay_key(f"bridge:{agent}:reply:{mail_id}")


def failure_key(agent: str, mail_id: str, kind: str) -> str:
    """One failure notice per mail and cause, however often the bridge retries."""
    return clamp_relay_key(f"bridge:{agent}:failure:{kind}:{mail_id}")


#: The gateway's default limits are 1000 bytes of subject and 256 KiB of body
#: (docs/limits.md); a reply over them would be refused and the answer lost.
SUBJECT_MAX_BYTES = 990
BODY_MAX_BYTES = 240 * 1024


def clamp_utf8(text: str, max_bytes: int, mark: str = "…") -> str:
    """``text`` cut to ``max_bytes`` of UTF-8 on a character boundary, ``mark`` appended."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(mark.encode("utf-8"))
    return data[:room].decode("utf-8", "ignore") + mark


def reply_subject(subject: str) -> str:
    """``Re: subject`` without stacking prefixes, within the subject limit."""
    text = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    return clamp_utf8(text, SUBJECT_MAX_BYTES)
