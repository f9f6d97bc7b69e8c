"""Whether the PreemptionPolicies in memory are known to be the cluster's: fail closed.

Preemption under policies is only as safe as the view of them. A view is *current* when
all of these hold:

1. a complete LIST of preemptionpolicies has been handled (a new process, or a follower
   that just took the lease, preempts nothing before its first listing);
2. no LIST or WATCH has failed since the last complete LIST (the watcher re-lists after
   any failure, not only 410: a resumed watch would replay what it missed, but while it
   was down nobody could say what that was);
3. the last check of the PreemptionPolicy CRD found it served (present, Established,
   not being deleted, readable). The watcher checks it after every listing and after
   every deletion of a policy, because deleting the CRD deletes its policies: those
   deletions are not an operator lifting a protection (scheduler.policy.store holds
   them).

While a view is not current, every preemption attempt is refused with the reason
(`reason()`), the /readyz check "preemption-policies" fails with it, and the gauge
`scheduler_preemption_policies_synced` is 0. Scheduling without preemption goes on.

How stale may a current view be? As stale as the watch itself: events arrive with the
API server's watch latency, and a connection that died without a FIN is noticed at the
latest at the watch's read deadline (`watcher.WATCH_TIMEOUT_SECONDS` plus the client's
slack). A clean end of a watch stream (its timeoutSeconds) is not a failure: it is
re-opened at once from the same resourceVersion, which replays anything in between.

All of it runs on the scheduler's one event loop; nothing here locks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["NOT_LISTED", "PolicySync"]

log = logging.getLogger(__name__)

NOT_LISTED = "waiting for the first complete PreemptionPolicy listing"


class PolicySync:
    def __init__(
        self,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        on_current: Callable[[], None] | None = None,
    ) -> None:
        self._monotonic = monotonic
        self._listed = False
        self._error: str | None = None  # a LIST or WATCH failure since the last LIST
        self._crd_problem: str | None = None  # the last CRD check's finding
        self._since = monotonic()  # when reason() last changed between None and not
        self.on_current = on_current  # the view became current (requeue, hold clock)

    def reason(self) -> str | None:
        """None when the view is current; else why not."""
        if not self._listed:
            return f"{NOT_LISTED}: {self._error}" if self._error else NOT_LISTED
        return self._error or self._crd_problem

    @property
    def current(self) -> bool:
        return self.reason() is None

    def seconds_in_state(self) -> float:
        """Seconds since the view last became current, or last stopped being current."""
        return self._monotonic() - self._since

    # ---- the watcher's side ----------------------------------------------------------
    def listed(self) -> None:
        """A complete LIST was handled."""
        before = self.reason()
        self._listed, self._error = True, None
        self._changed(before)

    def failed(self, why: str) -> None:
        """A LIST or WATCH failed, or the watcher itself had to be restarted."""
        before = self.reason()
        self._error = why
        self._changed(before)

    def crd_checked(self, problem: str | None) -> None:
        """The CRD check's finding: None when the CRD is served."""
        before = self.reason()
        self._crd_problem = problem
        self._changed(before)

    def _changed(self, before: str | None) -> None:
        after = self.reason()
        if (before is None) == (after is None):
            return
        self._since = self._monotonic()
        if after is None:
            log.info("PreemptionPolicies in sync: preemption under policies resumes")
            if self.on_current is not None:
                self.on_current()
        else:
            log.warning("PreemptionPolicies not in sync, preemption refused: %s", after)
