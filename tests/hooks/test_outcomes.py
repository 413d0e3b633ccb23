"""The pure rules of the waiting side (docs/behaviour.md#rules-on-the-waiting-side): whitelist, own
decision only,
permanent vs transient failures."""

from __future__ import annotations

import httpx
import pytest

from mailui4agents.client import ApiError, GatewayUnreachable
from mailui4agents.client.asking import Decision, is_own_decision
from mailui4agents.hooks.outcomes import duplicate, from_decision, from_error


def data(decision: object, note: object = None, by: object = "ana", via: object = None) -> Decision:
    """A decided request as the gateway's JSON, decoded as the hook decodes it."""
    return Decision.of({"decision": decision, "note": note, "decided_by": by, "decided_via": via})


@pytest.mark.parametrize("decision", ["approve", "approved"])
def test_only_an_explicit_approval_allows(decision: str) -> None:
    assert from_decision(data(decision), timeout_s=5).verdict == "allow"


@pytest.mark.parametrize(
    "decision",
    ["deny", "denied", "expired", "cancelled", "", None, "APPROVE", "allow", "yes", 1, True],
)
def test_everything_else_denies(decision: object) -> None:
    assert from_decision(data(decision), timeout_s=5).verdict == "deny"


def test_the_reason_carries_who_and_the_note() -> None:
    assert from_decision(data("deny", "use staging"), timeout_s=5).reason == (
        "denied by ana: use staging"
    )
    assert from_decision(data("approve", "ok"), timeout_s=5).reason == "approved by ana: ok"
    assert from_decision(data("deny", "  "), timeout_s=5).reason == "denied by ana"
    assert from_decision(data("approve", "ok"), timeout_s=5).note == "ok"
    assert from_decision(data("approve", 7), timeout_s=5).note is None
    grant = from_decision(data("approve", by="grant:g1"), timeout_s=5)
    assert grant.verdict == "allow" and "standing grant" in grant.reason


def test_the_reason_names_where_the_decision_came_from() -> None:
    phone = {"channel": "push", "device": "Ana's phone"}
    assert from_decision(data("approve", via=phone), timeout_s=5).reason == (
        "approved by ana from Ana's phone"
    )
    web = {"channel": "web"}
    assert from_decision(data("deny", "use staging", via=web), timeout_s=5).reason == (
        "denied by ana from the web: use staging"
    )
    notification = {"channel": "push"}
    assert from_decision(data("approve", "ok", via=notification), timeout_s=5).reason == (
        "approved by ana from a notification: ok"
    )
    # The gateway's own channels name nothing more.
    grant = from_decision(data("approve", by="grant:g1", via={"channel": "grant"}), timeout_s=5)
    assert grant.reason == "approved by a standing grant (grant:g1)"
    expired = data("expired", by="system", via={"channel": "system"})
    assert from_decision(expired, timeout_s=5).reason == "timed out: nobody decided within 5 s"


def test_expiry_says_timed_out_and_is_not_a_persons_refusal() -> None:
    reason = from_decision(data("expired", by="system"), timeout_s=540).reason
    assert "timed out" in reason and "540" in reason and "denied by" not in reason


def test_duplicate_relay_denies() -> None:
    assert duplicate().verdict == "deny"


def conflict(reason: str, **extra: object) -> ApiError:
    body = {"error": {"code": "conflict", "reason": reason, **extra}}
    return ApiError.from_response(httpx.Response(409, json=body))


@pytest.mark.parametrize("mail_driven", [True, False])
def test_the_409_reasons(mail_driven: bool) -> None:
    full = from_error(conflict("mode_allows", permission_mode="full"), mail_driven=mail_driven)
    assert full.verdict == "allow"
    for reason in ("mode_forbids", "no_human", "archived", "something_new"):
        assert from_error(conflict(reason), mail_driven=mail_driven).verdict == "deny"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
@pytest.mark.parametrize("mail_driven", [True, False])
def test_permanent_failures_deny_with_the_gateways_message(status: int, mail_driven: bool) -> None:
    error = ApiError(status, "x", "the gateway says no")
    decided = from_error(error, mail_driven=mail_driven)
    assert decided.verdict == "deny" and "the gateway says no" in decided.reason


@pytest.mark.parametrize("status", [None, 408, 429, 500, 502, 503])
def test_transient_failures_deny_mail_driven_and_ask_interactive(status: int | None) -> None:
    error = ApiError(status, "x", "try later")
    assert from_error(error, mail_driven=True).verdict == "deny"
    assert from_error(error, mail_driven=False).verdict == "ask"


def test_an_unreachable_gateway_is_transient() -> None:
    error = GatewayUnreachable("http://gw", OSError("connection refused"))
    assert from_error(error, mail_driven=True).verdict == "deny"
    assert from_error(error, mail_driven=False).verdict == "ask"


def test_a_409_mode_allows_needs_the_409() -> None:
    # The same reason on another status is not the gateway's "full mode" answer.
    body = {"error": {"code": "bad", "reason": "mode_allows"}}
    error = ApiError.from_response(httpx.Response(400, json=body))
    assert from_error(error, mail_driven=True).verdict == "deny"


def test_only_this_requests_decision_counts() -> None:
    assert is_own_decision({"request_id": "r1", "relay_key": "k1"}, "r1", "k1")
    assert not is_own_decision({"request_id": "r2", "relay_key": "k2"}, "r1", "k1")
    # The request id decides when present, even if the relay key happens to match.
    assert not is_own_decision({"request_id": "r2", "relay_key": "k1"}, "r1", "k1")
    assert is_own_decision({"relay_key": "k1"}, "r1", "k1")
    assert not is_own_decision({"relay_key": "k2"}, "r1", "k1")
    assert not is_own_decision({}, "r1", "k1")


def test_a_rules_decision_tells_the_model_the_rule_and_its_reason() -> None:
    """docs/rules.md: the gateway writes the rule's reason, naming the rule, as the note."""
    note = "denied by rule r-1: pushes go through review"
    denied = from_decision(data("deny", note, by="rule:r-1", via={"channel": "rule"}), timeout_s=5)
    assert (denied.verdict, denied.reason) == ("deny", note)
    allowed = from_decision(data("approve", None, by="rule:r-2"), timeout_s=5)
    assert (allowed.verdict, allowed.reason) == ("allow", "approved by rule r-2")
    # A rule never turns anything but an explicit approval into an allow.
    assert from_decision(data("expired", None, by="rule:r-2"), timeout_s=5).verdict == "deny"
