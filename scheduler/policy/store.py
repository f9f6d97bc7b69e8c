"""The policies in force, in memory: what the evaluator reads and what status reports.

The controller (kopf) feeds it every PreemptionPolicy event; the evaluator asks it for
the rules of a preemptor (`rules_for`) and reports outcomes (`record`). All of it runs
on the scheduler's one event loop, so nothing here locks.

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
from scheduler.preemption.victim_policy import VictimRules

__all__ = ["PolicyState", "PolicyStore"]

log = logging.getLogger(__name__)


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
    ) -> None:
        self._ns_labels = ns_labels
        self._wall = wall
        self._in_force: dict[str, PolicySpec] = {}
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
        was_in_force = self._in_force.pop(name, None) is not None
        self._states.pop(name, None)
        log.info("PreemptionPolicy %s deleted", name)
        self._changed(name)
        if was_in_force and self.on_spec_change is not None:
            self.on_spec_change()

    def state(self, name: str) -> PolicyState | None:
        return self._states.get(name)

    def names(self) -> list[str]:
        """Every policy object known, valid or not."""
        return sorted(self._states)

    def in_force(self) -> dict[str, PolicySpec]:
        return dict(self._in_force)

    def _changed(self, name: str) -> None:
        if self.on_change is not None:
            self.on_change(name)

    # ------------------------------------------------------------------ the evaluator's side
    def rules_for(self, preemptor: PodInfo, /) -> CombinedRules | None:
        applying = [p for p in self._in_force.values() if applies_to(p, preemptor, self._ns_labels)]
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
        longest = max((p.cooldown_seconds for p in self._in_force.values()), default=0)
        if len(self._last_preempted) < 1024:
            return  # pruning is for long runs; a small map costs nothing
        for key, at in list(self._last_preempted.items()):
            if now - at >= longest:
                del self._last_preempted[key]


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
