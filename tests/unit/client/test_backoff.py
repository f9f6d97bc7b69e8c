"""scheduler.client.backoff: capped, jittered exponential delays."""

from __future__ import annotations

import pytest

from scheduler.client.backoff import Backoff


def test_delays_double_up_to_the_cap_without_jitter() -> None:
    backoff = Backoff(initial=1.0, maximum=10.0, factor=2.0, jitter=0.0)
    assert [backoff.next_delay() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_jitter_adds_up_to_its_fraction_and_never_passes_the_cap() -> None:
    backoff = Backoff(initial=1.0, maximum=3.0, jitter=0.5, rand=lambda: 0.999)
    delays = [backoff.next_delay() for _ in range(4)]
    assert delays[0] == pytest.approx(1.4995)
    assert delays[1] == pytest.approx(2.999)
    assert delays[2:] == [3.0, 3.0]


def test_reset_starts_over_from_the_initial_delay() -> None:
    backoff = Backoff(initial=0.5, maximum=30.0, jitter=0.0)
    backoff.next_delay()
    backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 0.5


def test_many_failures_do_not_overflow() -> None:
    backoff = Backoff(initial=0.1, maximum=5.0, jitter=0.0)
    for _ in range(5000):
        delay = backoff.next_delay()
    assert delay == 5.0


def test_nonsense_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Backoff(initial=2.0, maximum=1.0)
