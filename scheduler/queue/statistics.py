"""The queues a pending pod can be in, by the names the metrics use, and what they hold."""

from __future__ import annotations

from dataclasses import dataclass

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"


@dataclass(frozen=True, slots=True)
class QueueStatistics:
    active: int
    backoff: int
    unschedulable: int
    gated: int
    in_flight: int
    scheduling_cycle: int

    def pending_pods(self) -> dict[str, int]:
        """The values of scheduler_pending_pods{queue}."""
        return {
            ACTIVE: self.active,
            BACKOFF: self.backoff,
            UNSCHEDULABLE: self.unschedulable,
            GATED: self.gated,
        }
