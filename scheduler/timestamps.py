"""Timestamps as the API writes them: metav1.Time, RFC 3339 in UTC to the second
(conditions' lastTransitionTime, explain's times). metav1.MicroTime, for events, is
client.events.micro_time."""

from __future__ import annotations

import datetime as dt


def rfc3339(moment: dt.datetime | float) -> str:
    """A datetime (any zone) or a Unix time in seconds, as metav1.Time."""
    if isinstance(moment, (int, float)):
        moment = dt.datetime.fromtimestamp(moment, dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
