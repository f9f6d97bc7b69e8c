"""The policies in force, in memory: what the evaluator reads and what status reports.

The watcher (scheduler.policy.watcher) feeds it every PreemptionPolicy event; the
evaluator asks it whether preemption may run at all (`refuse_all`: not while the view is
not current, scheduler.policy.sync), for the rules of a preemptor (`rules_for`) and
reports outcomes (`record`). All of it runs on the scheduler's one event loop, so
nothing here locks.

- A valid object replaces the policy in force at once. An invalid one (PolicyError)
  leaves the last valid version of that policy in force and is reported Ready=False
  with the message; an invalid *first* version puts nothing in force.
- Counters (victimsChosen, preemptionsRefused) live here per policy and survive spec
  changes; a replica that first sees a policy starts from the counts in its status, so
  a new leader continues its predecessor's counts (increments of the old leader not yet
  written are lost). The cooldown memory (owner -> when its last pod was chosen as a
  victim) is the leader's, in memory: it starts empty after a failover.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.metrics import PolicyMetrics
from scheduler.model.pod import PodInfo
from scheduler.policy.rules import CombinedRules, NamespaceLabels, applies_to, owner_key
from scheduler.policy.spec import PolicyError, PolicySpec, parse_policy
from scheduler.policy.sync import PolicySync
from scheduler.preemption.victim_policy import VictimRules

__all__ = ["LOST_POLICY_HOLD", "PolicyState", "PolicyStore"]

log = logging.getLogger(__name__)

LOST_POLICY_HOLD = 60.0
"""Seconds a policy lost with its CRD stays in force once the view is current again."""


@dataclass
class PolicyState:
    """What status reports for one policy object."""

    name: str
    generation: int = 0
    ready: bool = False
    message: str = ""
    in_force_generation: int | None = None  # the generation of the version in force
    victims_chosen: int = 0
    preemptions_refused: int = 0


class PolicyStore:
    def __init__(
        self,
        ns_labels: NamespaceLabels,
        *,
        metrics: PolicyMetrics | None = None,
        wall: Callable[[], float] = time.time,
        on_change: Callable[[str], None] | None = None,
        on_spec_change: Callable[[], None] | None = None,
        sync: PolicySync | None = None,
    ) -> None:
        self._ns_labels = ns_labels
        self._wall = wall
        # None: a store fed by hand (tests, explain fixtures), always current
        self.sync = sync
        self._in_force: dict[str, PolicySpec] = {}
        self._pending_delete: set[str] = set()  # seen deleted, kept until the CRD check
        self._held: dict[str, PolicySpec] = {}  # lost with their CRD
        self._hold_until: float | None = None  # wall time; None: the clock has not started
        self._states: dict[str, PolicyState] = {}
        self._last_preempted: dict[str, float] = {}
        self.on_change = on_change  # a policy's status changed (the status writer)
        self.on_spec_change = on_spec_change  # the rules in force changed (requeue pods)
        self.metrics = metrics if metrics is not None else PolicyMetrics()

    # ------------------------------------------------------------------ the controller's side
    def apply(self, obj: Mapping[str, Any]) -> PolicyState:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = PolicyState(name)
            _seed_counters(state, obj.get("status"))
        gen = meta.get("generation")
        seen_before = state.generation
        state.generation = gen if isinstance(gen, int) else 0
        try:
            spec = parse_policy(obj)
        except PolicyError as exc:
            state.ready = False
            kept = state.in_force_generation
            state.message = f"invalid: {exc}" + (
                f"; generation {kept} stays in force" if kept is not None else "; not in force"
            )
            if state.generation != seen_before:
                log.warning(
                    "PreemptionPolicy %s generation %d invalid: %s", name, state.generation, exc
                )
        else:
            changed = self._in_force.get(name) != spec
            self._in_force[name] = spec
            self._pending_delete.discard(name)  # it exists (again)
            if self._held.pop(name, None) is not None:
                log.info("PreemptionPolicy %s listed again: it replaces the held version", name)
            state.ready = True
            state.in_force_generation = spec.generation
            state.message = "in force"
            if changed:  # not for the events of our own status writes
                log.info("PreemptionPolicy %s generation %d in force", name, spec.generation)
                if self.on_spec_change is not None:
                    self.on_spec_change()
        self._changed(name)
        return state

    def delete(self, name: str) -> None:
        """The object was seen deleted. It stays in force until the watcher's CRD check
        (`confirm_deletions` or `hold_deletions`); a policy never in force goes now."""
        if name not in self._in_force:
            self._states.pop(name, None)
            self._changed(name)
            return
        self._pending_delete.add(name)
        log.info("PreemptionPolicy %s deleted; in force until its CRD is checked", name)

    @property
    def pending_deletions(self) -> frozenset[str]:
        return frozenset(self._pending_delete)

    def confirm_deletions(self) -> None:
        """The CRD is served as before: the pending deletions were an operator's."""
        names, self._pending_delete = sorted(self._pending_delete), set()
        for name in names:
            self._in_force.pop(name, None)
            self._states.pop(name, None)
            log.info("PreemptionPolicy %s deleted", name)
            self._changed(name)
        if names and self.on_spec_change is not None:
            self.on_spec_change()

    def hold_deletions(self) -> None:
        """The pending deletions went with the CRD: hold them in force."""
        names, self._pending_delete = sorted(self._pending_delete), set()
        for name in names:
            spec = self._in_force.pop(name, None)
            self._states.pop(name, None)
            if spec is not None:
                self._held[name] = spec
                log.warning(
                    "PreemptionPolicy %s went with its CRD: held in force until it is "
                    "listed again, or %.0fs after the policies are in sync again",
                    name,
                    LOST_POLICY_HOLD,
                )
        self._hold_until = None  # restarts when the view is current again

    @property
    def held(self) -> frozenset[str]:
        return frozenset(self._held)

    def start_hold_clock(self) -> float | None:
        """The view is current again: held policies expire `LOST_POLICY_HOLD` seconds
        from now (unless listed again). Returns the delay, or None when nothing is held."""
        if not self._held:
            return None
        if self._hold_until is None:
            self._hold_until = self._wall() + LOST_POLICY_HOLD
        return max(0.0, self._hold_until - self._wall())

    def expire_held(self) -> float | None:
        """Drop the held policies when their time is up (the watcher's timer). Returns
        the seconds still to wait (a timer on another clock may fire early), else None."""
        if not self._held or self._hold_until is None:
            return None
        left = self._hold_until - self._wall()
        if left > 0:
            return left
        names = sorted(self._held)
        self._held.clear()
        self._hold_until = None
        log.info("PreemptionPolicies lost with their CRD no longer held: %s", ", ".join(names))
        if self.on_spec_change is not None:
            self.on_spec_change()
        return None

    def state(self, name: str) -> PolicyState | None:
        return self._states.get(name)

    def listed_names(self) -> set[str]:
        """Every policy object the store knows from the API (not the held ones)."""
        return set(self._states) | set(self._in_force)

    def names(self) -> list[str]:
        """Every policy object known, valid or not."""
        return sorted(self._states)

    def in_force(self) -> dict[str, PolicySpec]:
        """Every policy the evaluator applies: listed (pending deletions included) and
        held."""
        return self._held | self._in_force

    def _changed(self, name: str) -> None:
        if self.on_change is not None:
            self.on_change(name)

    # ------------------------------------------------------------------ the evaluator's side
    def refuse_all(self, preemptor: PodInfo, /) -> str | None:
        """None when preemption may run under the rules; else why no pod may be a victim
        now (the view is not current). Records nothing: the evaluator counts a refusal
        it acted on through `note_refused_all`."""
        why = self.unsynced_reason()
        return unsynced_message(why) if why is not None else None

    def note_refused_all(self, preemptor: PodInfo, /) -> None:
        self.metrics.unsynced_refusals.inc()

    def unsynced_reason(self) -> str | None:
        return self.sync.reason() if self.sync is not None else None

    def rules_for(self, preemptor: PodInfo, /) -> CombinedRules | None:
        applying = [
            p for p in self.in_force().values() if applies_to(p, preemptor, self._ns_labels)
        ]
        if not applying:
            return None
        return CombinedRules(applying, self._ns_labels, self._last_preempted.get, self._wall())

    def record(
        self, preemptor: PodInfo, rules: VictimRules, victims: tuple[PodInfo, ...] | None, /
    ) -> None:
        if victims is not None:
            now = self._wall()
            for v in victims:
                key = owner_key(v)
                if key is not None:
                    self._last_preempted[key] = now
            self._forget_old_cooldowns(now)
            for name in rules.policies:
                state = self._states.get(name)
                if state is not None:
                    state.victims_chosen += len(victims)
                self.metrics.victims.labels(policy=name).inc(len(victims))
                self._changed(name)
            return
        for name in rules.refusing_policies():
            state = self._states.get(name)
            if state is not None:
                state.preemptions_refused += 1
            self.metrics.refusals.labels(policy=name).inc()
            self._changed(name)

    def _forget_old_cooldowns(self, now: float) -> None:
        longest = max((p.cooldown_seconds for p in self.in_force().values()), default=0)
        if len(self._last_preempted) < 1024:
            return  # pruning is for long runs; a small map costs nothing
        for key, at in list(self._last_preempted.items()):
            if now - at >= longest:
                del self._last_preempted[key]


def unsynced_message(why: str) -> str:
    return f"PreemptionPolicies not in sync ({why}): no victims until they are"


def _seed_counters(state: PolicyState, status: Any) -> None:
    """A new leader (or a restart) continues the counts its predecessor wrote."""
    if not isinstance(status, Mapping):
        return
    for field_name, attr in (
        ("victimsChosen", "victims_chosen"),
        ("preemptionsRefused", "preemptions_refused"),
    ):
        value = status.get(field_name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            setattr(state, attr, value)
