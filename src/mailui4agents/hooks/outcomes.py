"""From the gateway's answers to the hook's decision (docs/behaviour.md#rules-on-the-waiting-side),
as pure functions.

Only an explicit approval allows (:func:`outcome_allows`, a whitelist): a
denial, an expiry, a cancellation, an empty or unknown decision all deny. The
reason always carries the human's note when there is one, and a timeout says
"timed out", so the model can tell it from a person's refusal.
"""

from __future__ import annotations

from mailui4agents.client import ApiError, GatewayUnreachable
from mailui4agents.client.asking import Decision
from mailui4agents.domain.decided_via import via_text
from mailui4agents.domain.policy import outcome_allows
from mailui4agents.hooks.types import HookDecision, allow, ask, deny

GRANT_PREFIX = "grant:"
#: `decided_by` of a request a rule decided (docs/rules.md); its note names the rule.
RULE_PREFIX = "rule:"
#: How a deny for a request the gateway would not take begins (hooks/race.py
#: leaves those to the terminal's dialog).
REFUSED = "the gateway refused the request"


def from_decision(closed: Decision, *, timeout_s: float) -> HookDecision:
    """A decided request (decoded from PermissionOut or a ``permission_decision``
    event's data). The reason says who decided and from where: "approved by ana
    from Ana's phone: ok", "denied by ana from the web: use staging"."""
    decision = closed.decision
    who = closed.decided_by or "someone"
    via = closed.decided_via
    where = via_text(via.channel, via.device) if via is not None else ""
    note = closed.note if closed.note is not None and closed.note.strip() else None
    suffix = f": {note}" if note else ""
    if who.startswith(RULE_PREFIX) and decision in ("approve", "deny"):
        verb = "approved" if outcome_allows(decision) else "denied"
        text = note or f"{verb} by rule {who.removeprefix(RULE_PREFIX)}"
        return allow(text, note) if outcome_allows(decision) else deny(text, note)
    if outcome_allows(decision):
        if who.startswith(GRANT_PREFIX):
            return allow(f"approved by a standing grant ({who}){suffix}", note)
        return allow(f"approved by {who}{where}{suffix}", note)
    if decision == "expired":
        return deny(f"timed out: nobody decided within {timeout_s:g} s{suffix}", note)
    if decision == "deny":
        return deny(f"denied by {who}{where}{suffix}", note)
    if decision == "cancelled":
        return deny(f"cancelled by {who} (the session was archived or closed){suffix}", note)
    return deny(f"not approved: the gateway reported decision {decision!r}{suffix}", note)


def from_error(error: ApiError, *, mail_driven: bool) -> HookDecision:
    """A failed gateway call.

    Transient failures (network, 5xx, 408, 429) deny in a mail-driven turn —
    nobody sits at a terminal — and fall back to the platform's own prompt in
    an interactive one. Permanent ones (other 4xx, 401 included) deny at once
    with the gateway's message, except the 409 that says the session is in
    ``full`` mode, which must allow explicitly.
    """
    if isinstance(error, GatewayUnreachable) or not error.permanent:
        if mail_driven:
            return deny(
                f"the gateway is unavailable ({error.message}); this turn is mail-driven, "
                "so there is nobody to ask locally: denied"
            )
        return ask(f"the gateway is unavailable ({error.message}); asking here instead")
    reason = error.detail.get("reason")
    if (
        error.status == 409
        and reason == "mode_allows"
        and error.detail.get("allowed_by") == "sandbox"
    ):
        return allow(
            "the bridge proved its sandbox: in workspace mode the kernel refuses writes "
            "outside the workspace, so guarded calls run without asking"
        )
    if error.status == 409 and reason == "mode_allows":
        return allow("the mail session is in full mode: guarded tools are allowed")
    if error.status == 409 and reason == "mode_forbids":
        return deny("the mail session is in plan mode (read-only): guarded tools are refused")
    if error.status == 409 and reason == "no_human":
        return deny("no human takes part in this mail session, so nobody could approve: denied")
    return deny(f"{REFUSED} ({error.status}): {error.message}")


def duplicate() -> HookDecision:
    """``duplicate_relay``: this tool call was already asked about, and nobody will
    ever decide this second request."""
    return deny(
        "duplicate request: the gateway already has a request for this very tool call "
        "(same relay key), so nobody will ever decide this one: denied"
    )
