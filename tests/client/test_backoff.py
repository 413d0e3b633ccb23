"""Tests for the reconnect backoff."""

from __future__ import annotations

import random

import pytest

from mailui4agents.client.backoff import Backoff


def test_delays_double_from_the_initial_delay_up_to_the_cap_with_jitter() -> None:
    backoff = Backoff(initial=0.2, cap=10.0, rng=random.Random(7))
    ceilings = [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0, 10.0]
    for ceiling in ceilings:
        assert ceiling / 2 <= backoff.next_delay() <= ceiling


def test_reset_starts_over_from_the_initial_delay() -> None:
    backoff = Backoff(initial=0.2, cap=10.0, rng=random.Random(7))
    for _ in range(6):
        backoff.next_delay()
    backoff.reset()
    assert 0.1 <= backoff.next_delay() <= 0.2


def test_jitter_spreads_clients_that_start_together() -> None:
    delays = {Backoff(rng=random.Random(seed)).next_delay() for seed in range(20)}
    assert len(delays) > 1


def test_an_initial_delay_above_the_cap_is_refused() -> None:
    with pytest.raises(ValueError):
        Backoff(initial=20.0, cap=10.0)


def test_the_servers_retry_hint_sets_the_first_delay_within_the_cap() -> None:
    backoff = Backoff(initial=0.2, cap=10.0)
    backoff.follow(None)  # no hint: unchanged
    assert backoff.initial == 0.2
    backoff.follow(3000)  # SSE `retry:` is in milliseconds
    assert backoff.initial == 3.0
    backoff.follow(60_000)
    assert backoff.initial == 10.0
    backoff.follow(0)  # never zero: a hot reconnect loop
    assert backoff.initial == 0.001
