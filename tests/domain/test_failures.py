"""Tests for the permanent-versus-transient failure classification."""

from __future__ import annotations

import pytest

from mailui4agents.domain.failures import classify_failure, is_permanent_status

# Written out by hand, independently of the implementation: the statuses that a
# client must never retry. 408 and 429 are deliberately missing.
PERMANENT = {
    *range(400, 408),  # 400 bad request .. 407 proxy auth required (401, 403 included)
    *range(409, 429),  # 409 conflict .. 428 precondition required (413 too large)
    *range(430, 500),  # 431 headers too large .. 499
}
EXPECTED = {
    status: ("permanent" if status in PERMANENT else "transient") for status in range(100, 600)
}


@pytest.mark.parametrize("status", sorted(EXPECTED))
def test_every_status_is_classified_as_the_table_says(status: int) -> None:
    assert classify_failure(status) == EXPECTED[status]
    assert is_permanent_status(status) is (EXPECTED[status] == "permanent")


def test_the_table_names_the_statuses_that_matter() -> None:
    assert EXPECTED[401] == "permanent"
    assert EXPECTED[403] == "permanent"
    assert EXPECTED[404] == "permanent"
    assert EXPECTED[408] == "transient"
    assert EXPECTED[429] == "transient"
    assert EXPECTED[500] == "transient"
    assert EXPECTED[503] == "transient"


def test_a_network_error_without_status_is_transient() -> None:
    assert classify_failure(None) == "transient"
